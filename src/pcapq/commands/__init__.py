"""What each command of `pcapq` does once click (pcapq.cli) has read its options: one module per
command, each with a `run` taking the options typed."""

"""The causes of failure pcapq names, one module each, listed in `pcapq.causes.registry`."""

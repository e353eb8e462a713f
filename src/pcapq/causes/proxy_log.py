"""What nginx writes in error.log (and the status it returns) for what its connect() or read saw."""

LINES = {
    "refused": "connect() failed (111: Connection refused) while connecting to upstream -> 502",
    "timed_out": "upstream timed out (110: Connection timed out) while connecting to upstream -> 504",
    "reset_by_server": "recv() failed (104: Connection reset by peer) while reading response header from upstream -> 502",
    "read_timeout": "upstream timed out (110: Connection timed out) while reading response header from upstream -> 504",
    "client_gone": "the proxy's own client closed the connection first -> 499",
    "no_port": "connect() to upstream failed (99: Cannot assign requested address) while connecting to upstream -> 502",
}

"""What nginx writes in error.log (and the status it returns) for what its connect() or read saw."""

LINES = {
    "refused": "connect() failed (111: Connection refused) while connecting to upstream -> 502",
    "timed_out": "upstream timed out (110: Connection timed out) while connecting to upstream -> 504",
    "reset_by_server": "recv() failed (104: Connection reset by peer) while reading response header from upstream -> 502",
    "premature_close": "upstream prematurely closed connection while reading response header from upstream -> 502",
    "read_timeout": "upstream timed out (110: Connection timed out) while reading response header from upstream -> 504",
    "client_gone": "the proxy's own client closed the connection first -> 499",
    "no_port": "connect() to upstream failed (99: Cannot assign requested address) while connecting to upstream -> 502",
    # What connect() returns after an ICMP error (src/decode/icmp.rs: IcmpKind::connect_errno()).
    "no_route_to_host": "connect() failed (113: No route to host) while connecting to upstream -> 502",
    "net_unreachable": "connect() failed (101: Network is unreachable) while connecting to upstream -> 502",
    "permission_denied": "connect() failed (13: Permission denied) while connecting to upstream -> 502",
    "host_down": "connect() failed (112: Host is down) while connecting to upstream -> 502",
    "protocol_not_available": "connect() failed (92: Protocol not available) while connecting to upstream -> 502",
    "not_supported": "connect() failed (95: Operation not supported) while connecting to upstream -> 502",
    "not_on_network": "connect() failed (64: Machine is not on the network) while connecting to upstream -> 502",
    "protocol_error": "connect() failed (71: Protocol error) while connecting to upstream -> 502",
    "send_timeout": "upstream timed out (110: Connection timed out) while sending request to upstream -> 504",
}

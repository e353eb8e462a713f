"""What to change, and what the proxy probably logged, for each cause of failure."""

from __future__ import annotations

ADVICE = {
    "accept_queue_overflow": (
        "The server accepts connections slower than they arrive. Add workers or make them faster "
        "(php-fpm pm.max_children), then size the backlog: listen.backlog and net.core.somaxconn "
        "(the effective backlog is the smaller). A backlog deeper than service rate x the proxy's "
        "timeout only makes requests wait until the proxy gives up: 502s become 504s."
    ),
    "syn_queue_overflow": (
        "Half-open requests fill the SYN queue. Turn on net.ipv4.tcp_syncookies=1, raise "
        "net.ipv4.tcp_max_syn_backlog and the listen backlog, and find who sends SYNs that are "
        "never completed."
    ),
    "listen_drops": (
        "The server dropped SYNs. Check `nstat -az TcpExtListenDrops TcpExtListenOverflows "
        "TcpExtTCPReqQFullDrop` and `ss -lnt` (Recv-Q against Send-Q) on the server to see which queue."
    ),
    "closed_port": "Nothing listened on the port: check that the upstream runs and listens where the proxy points.",
    "network_loss": (
        "Packets were lost on the path, not in a listen queue. Look at interface errors and drops "
        "(`ip -s link`), conntrack (`conntrack -S`), and the links between proxy and server."
    ),
    "client_gave_up": (
        "The client stopped waiting before its kernel would have: its connect or read timeout "
        "(nginx proxy_connect_timeout, proxy_read_timeout) is shorter than the server needed."
    ),
    "slow_server": (
        "The server took the request but answered after the client's timeout. Profile the slow "
        "requests, or raise the proxy's read timeout if the wait is expected."
    ),
    "syn_flood": (
        "Many sources sent one SYN each and never completed the handshake: a SYN flood, or "
        "clients whose SYNs were spoofed. Keep net.ipv4.tcp_syncookies=1 (the default) so real "
        "clients still connect, filter the sources upstream, and look at `nstat -az "
        "TcpExtSyncookiesSent TcpExtListenDrops` on the server."
    ),
    "port_scan": (
        "A few sources probed many ports with one SYN each: a port scan. Nothing to tune in the "
        "proxy or the upstream; make sure only the ports that should answer do (firewall), and "
        "find who scans."
    ),
    "port_exhaustion": (
        "A proxy address used nearly every ephemeral port towards one upstream (in use or in "
        "TIME-WAIT). Use keepalive connections to the upstream (nginx `keepalive`), widen "
        "net.ipv4.ip_local_port_range, enable net.ipv4.tcp_tw_reuse, or add upstream addresses."
    ),
    "port_reuse": (
        "A client reused a 4-tuple still in TIME-WAIT. Widen net.ipv4.ip_local_port_range, use "
        "keepalive connections to the upstream (nginx `keepalive`), or spread over more upstream addresses."
    ),
}

# What nginx writes in error.log (and the status it returns) for what the client saw.
PROXY_LOG = {
    "refused": "connect() failed (111: Connection refused) while connecting to upstream -> 502",
    "timed_out": "upstream timed out (110: Connection timed out) while connecting to upstream -> 504",
    "reset_by_server": "recv() failed (104: Connection reset by peer) while reading response header from upstream -> 502",
    "read_timeout": "upstream timed out (110: Connection timed out) while reading response header from upstream -> 504",
    "client_gone": "the proxy's own client closed the connection first -> 499",
    "no_port": "connect() to upstream failed (99: Cannot assign requested address) while connecting to upstream -> 502",
}

"""The terms `pcapq explain` uses, each defined in plain words the first time it appears."""

from __future__ import annotations

TERMS: dict[str, str] = {
    "frame": "one captured packet; the number is the one Wireshark shows (1 for the first packet of the file)",
    "kernel": "the operating system's TCP code, which sends and answers packets on the application's behalf",
    "SYN": "the first packet of a TCP connection: 'I want to connect, my sequence numbers start here'",
    "ISN": "initial sequence number: where a side's byte numbering starts, chosen at random-looking per connection",
    "SYN-ACK": "the server kernel's answer to a SYN: 'agreed, and my sequence numbers start here'",
    "ACK": "a packet acknowledging the bytes (or SYN/FIN) received so far",
    "handshake": "SYN, SYN-ACK, ACK: the three packets that open a TCP connection",
    "listener": "the server's listening socket, made by listen(); it answers SYNs for the application",
    "SYN queue": (
        "the listener's list of half-open connections (request sockets): SYN received, SYN-ACK sent, "
        "final ACK awaited; its size comes from the listen() backlog and net.ipv4.tcp_max_syn_backlog"
    ),
    "accept queue": (
        "the listener's list of connections whose handshake is complete, waiting for the application "
        "to call accept(); it holds backlog + 1, backlog = min(listen() backlog, net.core.somaxconn)"
    ),
    "backlog": "the number given to listen(), capped by net.core.somaxconn: the size of the accept queue",
    "request socket": "the small record the server kernel keeps for a half-open connection in the SYN queue",
    "SYN cookie": (
        "a SYN-ACK whose sequence number encodes the connection, sent when the SYN queue is full "
        "(net.ipv4.tcp_syncookies=1); the server keeps nothing and rebuilds the connection from the ACK"
    ),
    "retransmission": "the same packet sent again because no acknowledgement came in time",
    "RTO": (
        "retransmission timeout: how long a kernel waits for an acknowledgement before sending again; "
        "it doubles after each try (exponential backoff)"
    ),
    "duplicate ACK": "an ACK repeating the previous one; it tells the sender something was missing or repeated",
    "fast retransmit": "a retransmission triggered by duplicate ACKs, before the RTO expires",
    "RST": "reset: a packet that ends a connection at once, without the FIN exchange",
    "FIN": "the packet a side sends when its application closes the connection: 'no more data from me'",
    "TIME-WAIT": (
        "the state the side that closed first keeps for 60 s after the FINs, so that late packets of the "
        "old connection are not taken for a new one on the same 4-tuple"
    ),
    "4-tuple": "client address and port, server address and port: what names a TCP connection",
    "half-open": "a connection the client believes established while the server has no socket for it",
    "zero window": "the receiver says its buffer is full: the sender must wait",
    "ECONNREFUSED": "the error connect() returns when the server answers the SYN with an RST (no listener)",
    "ECONNRESET": "the error read() or write() returns when the peer reset the connection",
    "ICMP": (
        "the error messages a router or host sends back about a packet it could not deliver; each quotes the "
        "start of that packet, so it names the connection and the segment it answers"
    ),
    "MTU": (
        "maximum transmission unit: the largest IP packet a link carries; a router answers a bigger packet it may "
        "not fragment with ICMP 'fragmentation needed' (IPv6: 'packet too big') and its link's MTU"
    ),
    "DF": "don't fragment: the IPv4 header bit that forbids routers to split a packet; Linux sets it on TCP segments",
    "capture point": "where tcpdump ran: what it saw is what passed that point, not what the other end saw",
}


class Glossary:
    """Hands out definitions once: the first step that uses a term gets it."""

    def __init__(self) -> None:
        self._defined: set[str] = set()

    def first_use(self, terms: list[str]) -> dict[str, str]:
        new = {t: TERMS[t] for t in terms if t not in self._defined}
        self._defined.update(new)
        return new

"""The upstream host's counters and listeners: `nstat` / `netstat -s` output and `ss -lnt`
(docs/evidence.md).

Counters are named as nstat names them (`TcpExtListenOverflows`); `netstat -s` sentences are
mapped to those names. Two files are before and after, and the counters' change is what
happened in between; one file is a count since boot, or since the last `nstat` without -a.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from pcapq.endpoint import parse


# The counters a learner should look at first, with what each one counts
# (Linux include/uapi/linux/snmp.h; incremented in net/ipv4/tcp_ipv4.c, tcp_input.c, syncookies.c).
KEY_COUNTERS = {
    "TcpExtListenOverflows": "an ACK or SYN found the accept queue full (tcp_check_req(), tcp_conn_request())",
    "TcpExtListenDrops": "a packet to a listener was dropped, for any reason",
    "TcpExtTCPReqQFullDrop": "a SYN dropped because the SYN queue was full and syncookies were off",
    "TcpExtTCPReqQFullDoCookies": "a SYN answered with a SYN cookie because the SYN queue was full",
    "TcpExtSyncookiesSent": "SYN-ACKs carrying a SYN cookie",
    "TcpExtSyncookiesFailed": "ACKs that were checked as SYN cookies and failed",
    "TcpExtEmbryonicRsts": "RSTs sent for request sockets (tcp_abort_on_overflow=1)",
    "TcpExtTCPSynRetrans": "SYN and SYN-ACK retransmissions",
    "TcpExtTCPTimeouts": "retransmission timer expiries",
    "TcpRetransSegs": "segments sent again",
    "TcpPassiveOpens": "connections accepted by the handshake (SYN-RECEIVED reached)",
    "TcpAttemptFails": "connection attempts that failed",
    "TcpEstabResets": "established connections reset",
    "TcpOutRsts": "RSTs sent",
    "TcpExtTCPAbortOnClose": "connections reset by close() with data left unread (tcp_close())",
    "TcpExtTCPAbortOnData": "connections reset for data after close(), or by close() with SO_LINGER 0",
}


class CounterError(ValueError):
    """A file that is not nstat, netstat -s or ss output pcapq can read."""


# `netstat -s` sentences (net-tools statistics.c), as nstat names them.
NETSTAT_SENTENCES = [
    (re.compile(r"^(\d+) times the listen queue of a socket overflowed"), "TcpExtListenOverflows"),
    (re.compile(r"^(\d+) SYNs to LISTEN sockets (?:dropped|ignored)"), "TcpExtListenDrops"),
    (re.compile(r"^(\d+) SYN cookies sent"), "TcpExtSyncookiesSent"),
    (re.compile(r"^(\d+) SYN cookies received"), "TcpExtSyncookiesRecv"),
    (re.compile(r"^(\d+) invalid SYN cookies received"), "TcpExtSyncookiesFailed"),
    (re.compile(r"^(\d+) segments retransmitted"), "TcpRetransSegs"),
    (re.compile(r"^(\d+) segments retransmited"), "TcpRetransSegs"),
    (re.compile(r"^(\d+) other TCP timeouts"), "TcpExtTCPTimeouts"),
    (re.compile(r"^(\d+) passive connection openings"), "TcpPassiveOpens"),
    (re.compile(r"^(\d+) active connection openings"), "TcpActiveOpens"),
    (re.compile(r"^(\d+) failed connection attempts"), "TcpAttemptFails"),
    (re.compile(r"^(\d+) connection resets received"), "TcpEstabResets"),
    (re.compile(r"^(\d+) resets sent"), "TcpOutRsts"),
    (re.compile(r"^(\d+) resets received for embryonic SYN_RECV sockets"), "TcpExtEmbryonicRsts"),
]
NSTAT_LINE = re.compile(r"^([A-Z][A-Za-z0-9]+)\s+(\d+)(?:\s+[\d.]+)?\s*$")
TABLE_LINE = re.compile(r"^([A-Z][A-Za-z0-9]+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s*$")
SECTION = re.compile(r"^([A-Za-z]+):\s*$")
NAMED = re.compile(r"^([A-Za-z][A-Za-z0-9]+): (\d+)$")


@dataclass
class Counters:
    path: str
    format: str
    """`nstat`, `netstat`, `table` (pcapq lab's before/after file)."""
    values: dict[str, int] = field(default_factory=dict)
    before: Optional[dict[str, int]] = None
    """A lab table's first column."""


def _lines(path: str, what: str) -> list[str]:
    """The file's lines; an unreadable file is a CounterError naming `what` was wanted."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError as e:
        raise CounterError(f"{path}: cannot read {what}: {e.strerror or e}") from None


def read_counters(path: str) -> Counters:
    """Reads `nstat`, `nstat -az`, `netstat -s` or a pcapq lab `.nstat.txt` file.

    Raises:
        CounterError: the file cannot be read or holds no counter.
    """
    texts = _lines(path, "the counters")
    table_before: dict[str, int] = {}
    table_after: dict[str, int] = {}
    nstat: dict[str, int] = {}
    netstat: dict[str, int] = {}
    section = ""
    for raw in texts:
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        if m := TABLE_LINE.match(text):
            table_before[m.group(1)] = int(m.group(2))
            table_after[m.group(1)] = int(m.group(3))
            continue
        if m := NSTAT_LINE.match(text):
            nstat[m.group(1)] = int(m.group(2))
            continue
        if m := SECTION.match(text):
            section = m.group(1)
            continue
        if m := NAMED.match(text):
            prefix = {"TcpExt": "TcpExt", "IpExt": "IpExt", "MPTcpExt": "MPTcpExt"}.get(section, section)
            netstat[prefix + m.group(1)] = int(m.group(2))
            continue
        for pattern, name in NETSTAT_SENTENCES:
            if m := pattern.match(text):
                netstat[name] = int(m.group(1))
                break
    if table_after:
        return Counters(path, "table", table_after, table_before)
    if nstat and len(nstat) >= len(netstat):
        return Counters(path, "nstat", nstat)
    if netstat:
        return Counters(path, "netstat", netstat)
    first = next((t for t in texts if t.strip()), "")
    raise CounterError(f"{path}: no counters in it: not nstat, netstat -s or a pcapq .nstat.txt file (first line: {first[:80]!r})")


@dataclass
class Movement:
    """What the counters did over the capture."""

    source: str
    """How it is said: `nstat`, `netstat -s`."""
    deltas: dict[str, int]
    """Counter -> change (two snapshots, or a lab table) or count (one snapshot)."""
    window: bool
    """True: `deltas` are changes over a window; False: counts since boot (or the last nstat)."""

    def get(self, name: str) -> Optional[int]:
        """The counter's change; 0 when absent from files that hold TCP counters (nstat without -z,
        netstat -s and a lab table leave out counters at 0 or that did not move)."""
        if name in self.deltas:
            return self.deltas[name]
        return 0 if any(k.startswith("Tcp") for k in self.deltas) else None


def movement(files: list[Counters]) -> Movement:
    """One or two snapshots as what changed."""
    source = "netstat -s" if files and files[0].format == "netstat" else "nstat"
    if len(files) == 2:
        a, b = files[0].values, files[1].values
        names = set(a) | set(b)
        return Movement(source, {n: b.get(n, 0) - a.get(n, 0) for n in names}, True)
    only = files[0]
    if only.before is not None:
        names = set(only.before) | set(only.values)
        # A lab table lists the counters that moved: any other stayed.
        return Movement(source, {n: only.values.get(n, 0) - only.before.get(n, 0) for n in names}, True)
    # `nstat` without -a prints changes since its last run; -az every counter: either way, a
    # counter at 0 did not move, and one above 0 moved at some time.
    return Movement(source, dict(only.values), False)


# ---- ss ----


@dataclass
class Listener:
    local: str
    """'10.0.0.2:9000', '*:9000', '[::]:9000' or a unix socket path."""
    recv_q: int
    """Connections waiting in the accept queue."""
    send_q: int
    """The backlog: the accept queue holds send_q + 1 (Linux v6.6 include/net/sock.h: sk_acceptq_is_full())."""
    unix: bool = False


SS_LISTEN = re.compile(r"^(?:(tcp|tcp6|u_str|u_seq|unix)\s+)?LISTEN\s+(\d+)\s+(\d+)\s+(\S+)")


def read_ss(path: str) -> list[Listener]:
    """Reads `ss -lnt` (or `ss -lntx`, `ss -xl`) output: every listener.

    Raises:
        CounterError: the file cannot be read or holds no listener.
    """
    texts = _lines(path, "the ss output")
    out = []
    for text in texts:
        m = SS_LISTEN.match(text.strip())
        if m:
            local = m.group(4)
            unix = m.group(1) in ("u_str", "u_seq", "unix") or local.startswith("/") or local.startswith("@")
            out.append(Listener(local, int(m.group(2)), int(m.group(3)), unix))
    if not out:
        first = next((t for t in texts if t.strip()), "")
        raise CounterError(f"{path}: no LISTEN line in it: not `ss -lnt` output (first line: {first[:80]!r})")
    return out


# How ss writes a listener on every address, before ":PORT".
WILDCARDS = ("*", "0.0.0.0", "[::]", "[::ffff:0.0.0.0]", "::")


def listener_for(listeners: list[Listener], server: str) -> Optional[Listener]:
    """The listener a server endpoint ('10.0.0.2:9000') connects to: its address, or a wildcard."""
    exact = [listener for listener in listeners if not listener.unix and listener.local == server]
    if exact:
        return exact[0]
    try:
        port = parse(server).port
    except ValueError:
        return None
    on_every_address = {f"{w}:{port}" for w in WILDCARDS}
    wild = [listener for listener in listeners if not listener.unix and listener.local in on_every_address]
    return wild[0] if wild else None

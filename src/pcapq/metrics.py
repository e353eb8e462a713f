"""`pcapq watch --metrics HOST:PORT -`: what the watch counts, served to Prometheus (docs/monitoring.md).

On each scrape the collector takes one snapshot from the core (`LiveInput.metrics()`: counts
since the start, per listener, the busiest `--max-listeners` named and the rest summed under
listener="other") and turns it into metric families with prometheus_client. `METRICS` defines
each metric once: its name, type, HELP text, unit and where its value comes from in the
snapshot; the collector, docs/monitoring.md's table (docs/metrics.py) and the tests read it.

A `source` is a path in the snapshot:
    segments                          a top-level number (no sample when it is None)
    listeners[].connections           a number per listener (a bool counts 0 or 1)
    listeners[].signs.final_ack_dropped   one key of a dict per listener
    listeners[].ended{outcome}        a dict per listener, its keys as the label
    listeners[].resets[]{side,answered}   records per listener, with a `count`
    listeners[].episode_signs[sign]   slugs per listener, each a sample of 1
and three that are not in the snapshot: `LiveInput.packets`, `now - latest_time` (the wall clock
minus a capture time) and `_core.__version__`.
"""

from __future__ import annotations

import errno
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence

from pcapq import _core

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric as Family

# Listeners the core names in the snapshot by default; the others are summed under "other".
MAX_LISTENERS = 20


@dataclass(frozen=True)
class Metric:
    name: str
    type: str  # "counter", "gauge" or "histogram"
    help: str
    source: str
    unit: str = ""

    @property
    def per_listener(self) -> bool:
        return self.source.startswith("listeners[].")

    @property
    def labels(self) -> tuple[str, ...]:
        """Its labels, `listener` first for a per-listener metric."""
        if self.source == "_core.__version__":
            return ("version",)
        named = re.search(r"[{\[](\w+(?:,\w+)*)[}\]]$", self.source)
        own = tuple(named.group(1).split(",")) if named else ()
        return (("listener",) if self.per_listener else ()) + own


# The signs the core reads from single segments (_core.VOCABULARY["live_signs"]), each counted
# by a metric of its own; tests/test_metrics.py fails when the core has a sign not listed here.
SIGN_METRICS: dict[str, str] = {
    "syn_retransmitted": "pcapq_syn_resent_total",
    "synack_retransmitted": "pcapq_synack_resent_total",
    "final_ack_dropped": "pcapq_synack_after_ack_total",
    "request_unacked": "pcapq_requests_resent_unacked_total",
    "data_retransmitted": "pcapq_data_resent_total",
    "reset_after_ack": "pcapq_handshakes_reset_total",
    "rejected": "pcapq_syns_refused_total",
}

SIGN_HELP: dict[str, str] = {
    "syn_retransmitted": "Client SYNs sent again with the same ISN, the first unanswered: a full SYN or accept queue, "
    "a listener dropping SYNs, or loss.",
    "synack_retransmitted": "Server SYN-ACKs sent again before the client's ACK: the SYN-ACK or the client's ACK "
    "was lost, or the client sent its SYN again.",
    "final_ack_dropped": "SYN-ACKs the server sent again after the client's handshake ACK: the server's kernel dropped "
    "that ACK because the listener's accept queue was full. The accept queue overflow sign.",
    "request_unacked": "Client requests sent again before the server acknowledged any data: the server's kernel did "
    "not take the connection (its handshake ACK dropped) or the path loses packets.",
    "data_retransmitted": "Other data segments sent again, either way: loss on the path, or a peer that stopped reading.",
    "reset_after_ack": "Handshakes the server reset on the client's ACK or first request, before any answer: "
    "net.ipv4.tcp_abort_on_overflow=1 with a full accept queue.",
    "rejected": "SYNs answered with an RST: nothing listens on the port.",
}

METRICS: tuple[Metric, ...] = (
    Metric("pcapq_build_info", "gauge", "pcapq's version, as the version label; always 1.", "_core.__version__"),
    Metric("pcapq_packets_read_total", "counter", "Capture records read from standard input, TCP or not.",
           "LiveInput.packets"),
    Metric("pcapq_tcp_segments_total", "counter", "TCP segments decoded from the capture.", "segments"),
    Metric("pcapq_capture_dropped_packets_total", "counter",
           "Packets the capture says were dropped before it wrote them (pcapng interface statistics, which a writer "
           "adds as it stops: dumpcap does, tcpdump -w does not); absent until the capture says.", "dropped"),
    Metric("pcapq_last_packet_age_seconds", "gauge",
           "Seconds from the newest packet's capture time to now: grows while nothing matches tcpdump's filter, "
           "or when the capture stalled.", "now - latest_time", unit="seconds"),
    Metric("pcapq_listeners_other", "gauge",
           "Listeners summed under listener=\"other\", beyond the --max-listeners busiest.", "listeners_other"),
    Metric("pcapq_connections_total", "counter", "Connections begun: first SYNs that arrived for the listener.",
           "listeners[].connections"),
    Metric("pcapq_connections_answered_total", "counter",
           "Connections the server answered: its first data arrived.", "listeners[].answered"),
    Metric("pcapq_connections_ended_total", "counter",
           "Connections that ended (left pcapq's table of live connections, or the input ended), by outcome "
           "(docs/diagnosis.md): completed, refused, timed_out, reset_by_server, ...",
           "listeners[].ended{outcome}"),
    *(Metric(name, "counter", SIGN_HELP[sign], f"listeners[].signs.{sign}") for sign, name in SIGN_METRICS.items()),
    Metric("pcapq_resets_total", "counter",
           "Connections reset, by the side of their first RST and the packet it answered (syn, synack, handshake_ack, "
           "ack, data, retransmit, fin, rst, or other).",
           "listeners[].resets[]{side,answered}"),
    Metric("pcapq_icmp_errors_total", "counter",
           "ICMP errors tied to the listener's connections, by kind (host_unreachable, port_unreachable, frag_needed, ...).",
           "listeners[].icmp{kind}"),
    Metric("pcapq_handshake_seconds", "histogram",
           "Handshake time: from the client's first SYN to its handshake ACK, SYNs re-sent included.",
           "listeners[].handshake_seconds", unit="seconds"),
    Metric("pcapq_first_byte_seconds", "histogram",
           "Time to first byte: from the client's first SYN to the server's first data.",
           "listeners[].first_byte_seconds", unit="seconds"),
    Metric("pcapq_retransmission_delay_seconds", "histogram",
           "What re-sends added to a connection: from its first SYN to the SYN copy that was answered, plus from its "
           "request's first copy to the copy that was acknowledged. Connections without re-sends are not counted.",
           "listeners[].retransmission_delay_seconds", unit="seconds"),
    Metric("pcapq_connections_waiting", "gauge",
           "Connections established for the client, neither answered nor closed yet: the accept queue, estimated from "
           "outside, plus accepted connections still unanswered.",
           "listeners[].waiting"),
    Metric("pcapq_episode_open", "gauge",
           "1 while the listener's episode is open: from its first sign until 5 s of capture time without one "
           "while it answered again.", "listeners[].episode_open"),
    Metric("pcapq_episode_sign", "gauge", "1 for each sign the listener's open episode showed.",
           "listeners[].episode_signs[sign]"),
)

BY_NAME = {m.name: m for m in METRICS}


# ---- the collector

def _listener_samples(m: Metric, listeners: Sequence[Mapping[str, Any]]) -> Iterator[tuple[list[str], Any]]:
    """(label values, value) of a per-listener metric, for each listener."""
    path = m.source[len("listeners[]."):]
    for entry in listeners:
        listener = entry["listener"]
        if match := re.fullmatch(r"(\w+)\[\]\{([\w,]+)\}", path):
            key, fields = match.group(1), match.group(2).split(",")
            for record in entry[key]:
                yield [listener, *(str(record[f]) for f in fields)], record["count"]
        elif match := re.fullmatch(r"(\w+)\{\w+\}", path):
            key = match.group(1)
            counts = entry[key]
            # Every outcome, 0 included: a series that appears above 0 hides its first increase.
            slugs = _core.VOCABULARY["outcomes"] if key == "ended" else counts
            for slug in slugs:
                yield [listener, slug], counts.get(slug, 0)
        elif match := re.fullmatch(r"(\w+)\[\w+\]", path):
            for slug in entry[match.group(1)]:
                yield [listener, slug], 1
        elif "." in path:
            key, sub = path.split(".")
            yield [listener], entry[key].get(sub, 0)
        else:
            yield [listener], entry[path]


def _histogram(h: Mapping[str, Any], bounds: Sequence[float]) -> tuple[list[tuple[str, float]], float]:
    """The core's per-bucket counts (+Inf last) as Prometheus's cumulative buckets, and the sum."""
    if len(h["counts"]) != len(bounds) + 1:
        raise ValueError(f"histogram with {len(h['counts'])} counts for {len(bounds)} bounds and +Inf")
    buckets: list[tuple[str, float]] = []
    total = 0
    for bound, n in zip([*map(repr, map(float, bounds)), "+Inf"], h["counts"]):
        total += n
        buckets.append((bound, total))
    return buckets, float(h["sum"])


def _family(m: Metric) -> Any:
    """An empty metric family of prometheus_client for `m`."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}
    return kinds[m.type](m.name, m.help, labels=m.labels, unit=m.unit)


def families(snapshot: Optional[Mapping[str, Any]], packets: Optional[int], now: float) -> Iterator[Family]:
    """The metric families of one snapshot (None before the input is read: pcapq_build_info only)."""
    for m in METRICS:
        family = _family(m)
        if m.source == "_core.__version__":
            family.add_metric([_core.__version__], 1)
        elif snapshot is None:
            continue
        elif m.source == "LiveInput.packets":
            if packets is not None:
                family.add_metric([], packets)
        elif m.source == "now - latest_time":
            if snapshot["latest_time"] is not None:
                family.add_metric([], max(0.0, now - snapshot["latest_time"]))
        elif m.type == "histogram":
            for entry in snapshot["listeners"]:
                buckets, total = _histogram(entry[m.source[len("listeners[]."):]], snapshot["buckets"])
                family.add_metric([entry["listener"]], buckets, total)
        elif m.per_listener:
            for labels, value in _listener_samples(m, snapshot["listeners"]):
                family.add_metric(labels, int(value))
        elif snapshot[m.source] is not None:
            family.add_metric([], snapshot[m.source])
        yield family


class WatchCollector:
    """A prometheus_client collector of the live input's counts, once `attach`ed to it."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.live: Optional[_core.LiveInput] = None
        self.clock = clock

    def attach(self, live: _core.LiveInput) -> None:
        self.live = live

    def describe(self) -> Iterator[Family]:
        return (_family(m) for m in METRICS)

    def collect(self) -> Iterator[Family]:
        live = self.live
        if live is None:
            return families(None, None, 0.0)
        return families(live.metrics(), live.packets, self.clock())


# ---- --metrics HOST:PORT

class MetricsAddressError(ValueError):
    """--metrics names no address pcapq can listen on; the message says why."""


def parse_address(text: str) -> tuple[str, int]:
    """'127.0.0.1:9465', ':9465' (every address: '::', which takes IPv4 too), '[::1]:9465' or
    'host:9465' as (host, port).

    Raises:
        MetricsAddressError: not HOST:PORT, or the port is not 0-65535.
    """
    match = re.fullmatch(r"(?:\[([0-9A-Fa-f:.%\w]+)\]|([^:\[\]\s]*)):(\d+)", text)
    if match is None:
        raise MetricsAddressError(f"--metrics {text!r}: give HOST:PORT, :PORT (every address) or [IPv6]:PORT, such as 127.0.0.1:9465")
    port = int(match.group(3))
    if port > 65535:
        raise MetricsAddressError(f"--metrics {text!r}: the port must be 0-65535")
    host = match.group(1) if match.group(1) is not None else match.group(2)
    return (host or "::", port)


def shown(host: str, port: int) -> str:
    """'127.0.0.1:9465', '[::1]:9465'."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url(host: str, port: int) -> str:
    return f"http://{shown('localhost' if host in ('::', '0.0.0.0') else host, port)}/metrics"


class MetricsServer:
    """prometheus_client's HTTP server of a WatchCollector, listening from the moment it is made
    (a port in use fails at once, before any input is read), serving what the core counted
    once `attach`ed to the live input, until `stop`."""

    def __init__(self, host: str, port: int, clock: Callable[[], float] = time.time) -> None:
        from prometheus_client import CollectorRegistry

        self.collector = WatchCollector(clock)
        registry = CollectorRegistry(auto_describe=True)
        registry.register(self.collector)
        try:
            self._server, self._thread = _start(host, port, registry)
        except socket.gaierror as e:
            raise MetricsAddressError(f"--metrics {shown(host, port)}: {host!r} is not a host name or address here ({e.strerror})") from e
        except OSError as e:
            raise MetricsAddressError(f"--metrics {shown(host, port)}: cannot listen there: {_why(e)}") from e
        self.host = host
        self.port = self._server.server_address[1]

    @property
    def url(self) -> str:
        return url(self.host, self.port)

    def attach(self, live: _core.LiveInput) -> None:
        self.collector.attach(live)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _start(host: str, port: int, registry: CollectorRegistry) -> tuple[WSGIServer, threading.Thread]:
    from prometheus_client import start_http_server

    if host != "::":
        return start_http_server(port, host, registry=registry)
    try:
        return start_http_server(port, "::", registry=registry)
    except OSError as e:
        if e.errno not in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
            raise
        # No IPv6 on this host (a container without it): every IPv4 address.
        return start_http_server(port, "0.0.0.0", registry=registry)


def _why(e: OSError) -> str:
    if e.errno == errno.EADDRINUSE:
        return "the port is in use (another pcapq or exporter?); pick another port"
    if e.errno == errno.EADDRNOTAVAIL:
        return "not an address of this host"
    if e.errno == errno.EACCES:
        return "permission denied (ports below 1024 need root)"
    return e.strerror or str(e)


# ---- docs/monitoring.md's table

def markdown_table() -> str:
    """The table of metrics in docs/monitoring.md (docs/metrics.py writes it)."""
    rows = ["| metric | type | labels | what it counts | from the snapshot |", "|---|---|---|---|---|"]
    for m in METRICS:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "-"
        help = m.help.replace("|", "\\|")
        rows.append(f"| `{m.name}` | {m.type} | {labels} | {help} | `{m.source}` |")
    return "\n".join(rows) + "\n"

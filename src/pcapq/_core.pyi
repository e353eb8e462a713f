"""Type stubs for pcapq's Rust core (src/bindings/mod.rs)."""

import os

from typing import Any, Callable, Final, Literal, Protocol, TypedDict, final, overload

from typing_extensions import NotRequired

from pcapq.lean import Schedule as Schedule
from pcapq.lean import Series
from pcapq.lean import SeriesKind as SeriesKind

__all__ = [
    "__version__", "JSON_SCHEMA_VERSION", "VOCABULARY", "Analysis", "Problems", "Episode", "Selection",
    "analyze", "analyze_many", "analyze_parts", "PcapqError", "CaptureError", "InternalError",
    "LiveInput", "analyze_stdin", "PARQUET_SCHEMA_VERSION", "write_parquet", "align_points",
]

__version__: Final[str]
JSON_SCHEMA_VERSION: Final[int]
PARQUET_SCHEMA_VERSION: Final[int]

# The core's words (src/detect, src/flow), written from VOCABULARY by tools/stub_literals.py;
# tests/test_vocabulary.py fails when they drift.
Outcome = Literal[
    "completed", "open", "refused", "timed_out", "abandoned", "reset_by_server", "reset_by_client", "partial",
    "unreachable", "closed_by_server",
]
Symptom = Literal[
    "syn_retransmitted", "synack_retransmitted", "final_ack_dropped", "request_unacked", "data_retransmitted",
    "syncookie_suspected", "reset_after_ack", "reset_after_expiry", "rejected", "tfo_fallback",
    "defer_accept_suspected", "syn_after_rst", "spurious_retransmission", "mtu_black_hole",
]
Fact = Literal[
    "syn_unanswered", "half_open", "one_syn", "probe", "scan_probe", "stray_ack_reset", "reused_in_time_wait",
    "request_acked", "request_unanswered", "client_waited", "never_connected", "queue_sign", "in_queue_window",
    "silent_host", "loopback", "synack_ignored", "rst_unprovoked", "icmp_answered", "icmp_prohibited", "icmp_no_route",
    "icmp_port_unreachable", "icmp_ttl_exceeded", "pmtu_discovered", "request_after_close", "answered_before",
    "synack_after_ack", "answer_crossed_close", "syn_resend_spurious", "one_way", "flow_trimmed", "resent_once",
    "reordering", "listener_stalled",
]
# The predictions a sign's explanations make of the capture (src/detect/checks.rs).
CheckName = Literal[
    "request_held_back", "sent_after_ack_arrived", "not_answer_to_resent_syn", "same_sender", "not_defer_accept",
    "on_request_timer", "first_syn_answer_lost", "resend_not_dsacked", "resent_whole", "not_capture_copy",
    "not_retry_after_refusal", "both_directions_seen", "watched_throughout", "flow_not_trimmed",
]
# The signs whose explanations the checks weigh.
SignName = Literal["synack_after_ack", "resent", "unanswered", "nothing_followed"]
Mark = Outcome | Symptom | Fact
EventKind = Literal[
    "syn", "syn_retransmit", "synack", "synack_retransmit", "handshake_ack", "data_first", "data_retransmit",
    "fin_retransmit", "dup_ack", "zero_window", "fin", "rst",
]
PacketRole = Literal["syn", "synack", "handshake_ack", "ack", "data", "retransmit", "fin", "rst"]
LogKind = Literal[
    "connect_timeout", "read_timeout", "send_timeout", "refused", "reset", "premature_close", "gateway_timeout",
    "bad_gateway", "connect_failure", "upstream_closed", "answered",
]
LogShape = Literal["no_handshake", "closed_at_connect", "unanswered", "refused", "reset", "server_closed", "answered"]
IcmpKind = Literal[
    "net_unreachable", "host_unreachable", "protocol_unreachable", "port_unreachable", "frag_needed",
    "source_route_failed", "net_unknown", "host_unknown", "host_isolated", "net_prohibited", "host_prohibited",
    "net_unreachable_for_tos", "host_unreachable_for_tos", "admin_prohibited", "precedence_violation",
    "precedence_cutoff", "unreachable_other", "no_route", "beyond_scope", "address_unreachable", "source_policy_failed",
    "reject_route", "ipv6_unreachable_other", "packet_too_big", "ttl_exceeded", "reassembly_time_exceeded",
]
# The symptoms a live watch reads from single segments (src/watch/mod.rs), and its episode events.
LiveSign = Literal[
    "syn_retransmitted", "synack_retransmitted", "final_ack_dropped", "request_unacked", "data_retransmitted",
    "reset_after_ack", "rejected",
]
EpisodeEventKind = Literal["opened", "new_signs", "recovered", "still_open"]
# What a connection's first RST answered, in the live metrics (src/watch/metrics.rs): a packet
# role, or "other".
ResetAnswer = Literal["syn", "synack", "handshake_ack", "ack", "data", "retransmit", "fin", "rst", "other"]

class _Vocabulary(TypedDict):
    outcomes: list[Outcome]
    failed_outcomes: list[Outcome]
    symptoms: list[Symptom]
    facts: list[Fact]
    fact_rules: dict[Fact, str]
    """Each fact's rule in words, declared with it (docs/diagnosis.md's table of facts)."""
    marks: list[Mark]
    event_kinds: list[EventKind]
    schedules: list[Schedule]
    series_kinds: list[SeriesKind]
    packet_roles: list[PacketRole]
    log_kinds: list[LogKind]
    log_shapes: list[LogShape]
    icmp_kinds: list[IcmpKind]
    icmp_facts: dict[Fact, list[IcmpKind]]
    """The facts an ICMP error marks its connection with, each with the kinds it stands for
    (a packet too big marks none)."""
    live_signs: list[LiveSign]
    episode_events: list[EpisodeEventKind]
    reset_answers: list[ResetAnswer]
    metric_buckets: list[float]
    """The live metrics' histogram upper bounds in seconds, +Inf left out (`LiveInput.metrics`)."""
    checks: list[CheckName]
    signs: list[SignName]
    check_texts: dict[CheckName, _CheckText]

class _CheckText(TypedDict):
    cites: str
    """The kernel function or RFC section the prediction rests on."""
    held: str
    failed: str
    competes: bool
    """Failed, a competing explanation of its sign holds."""
    signs: list[SignName]
    """The signs whose explanations it weighs: a SYN-ACK re-sent after the client's ACK, a SYN or data re-sent, a SYN
    or request unanswered before its re-send, or nothing following a connection's last packet."""

VOCABULARY: Final[_Vocabulary]

class PcapqError(Exception):
    """Base class of every error pcapq raises."""

class CaptureError(PcapqError):
    """A capture could not be opened or is not a capture.

    args: (message, kind, path); kind is one of "not_found", "permission_denied",
    "is_directory", "io", "gzip", "empty", "not_a_capture", "bad_header".
    """

class InternalError(PcapqError):
    """The core panicked: a bug in pcapq. args: (message,)."""

class _TextFile(Protocol):
    def write(self, text: str, /) -> object: ...

class _Tally(TypedDict):
    """The counts of connections the summary and its `all_time` share (the core's `Tally`)."""

    connections: int
    handshakes_completed: int
    with_syn_retransmits: int
    with_synack_retransmits: int
    with_data_retransmits: int
    with_dup_acks: int
    with_zero_window: int
    reset: int
    partial: int
    port_reuse: int
    snaplen_cut_segments: int
    duplicate_frames: int
    outcomes: dict[Outcome, int]
    symptoms: dict[Symptom, int]

class _Summary(_Tally):
    packets: int
    tcp_segments: int
    skipped: int
    all_time: NotRequired[_AllTime]
    icmp: NotRequired[_IcmpSummary]
    """ICMP errors in the capture; absent when there were none."""

class _IcmpSummary(TypedDict):
    total: int
    tied: int
    """Tied to a connection and the packet they answered."""
    no_connection: int
    """Quoting a TCP 4-tuple with no connection in the capture."""
    out_of_window: int
    """Quoting a sequence number outside its connection's window."""
    truncated: int
    """Quoting fewer than 8 bytes of TCP."""
    not_tcp: int
    by_kind: dict[IcmpKind, int]

_Side = Literal["client", "server"]
_ReadStop = Literal["end", "truncated", "corrupt", "io_error"]

class _Frame(TypedDict):
    file: int
    frame: int

class _PcapngInterface(TypedDict):
    name: str | None
    description: str | None
    link_type: str

class _PacketComment(TypedDict):
    frame: int
    comment: str

class _PcapngNotes(TypedDict):
    """What a pcapng file says about itself (docs/json.md)."""

    hardware: str | None
    os: str | None
    application: str | None
    comments: list[str]
    interfaces: list[_PcapngInterface]
    packet_comments: list[_PacketComment]
    packet_comments_total: int

class _AllTime(_Tally):
    """A watch with --keep: every connection since it began (the summary is the window's)."""

    since: float
    window_start: float
    keep_seconds: float

class _CaptureInfo(TypedDict):
    path: str
    format: Literal["pcap", "pcapng"] | None
    gzip: bool
    packets: int
    tcp_segments: int
    first_time: float | None
    last_time: float | None
    link_types: dict[str, int]
    read_stop: _ReadStop
    read_stop_detail: str | None
    pcapng: _PcapngNotes | None
    """None for classic pcap."""

class _Timeline(TypedDict):
    seconds: list[int]
    new: dict[Outcome, list[int]]
    retransmissions: list[int]
    waiting_in: list[int]
    waiting_out: list[int]

class _ServerClosed(TypedDict):
    file: int
    frame: int
    time: float

# A connection's first RST: who sent it, where, the role of the packet it answers and that packet,
# and how many seconds after it.
_FirstRst = TypedDict("_FirstRst", {
    "from": _Side, "file": int, "frame": int, "time": float, "answers": PacketRole | Literal["nothing"],
    "answers_frame": _Frame | None, "after": float | None,
})

class _Icmp(TypedDict):
    """One ICMP error that answered a packet of the connection (`connections[].icmp` of docs/json.md)."""

    file: int
    frame: int
    time: float
    offset: float
    """Seconds from the connection's first packet."""
    sender: str
    """Who sent it: the peer's host, or a router or firewall on the way."""
    kind: IcmpKind
    meaning: str
    mtu: int | None
    answers: _Side
    """Whose packet it answers."""
    answers_role: PacketRole | None
    answers_frame: _Frame | None
    seq: int | None
    """The quoted packet's sequence number, relative to its side's ISN."""
    quoted_len: int
    dont_fragment: bool
    errno: int | None
    """What a Linux connect() fails with when this answers the SYN (None: it does not fail)."""
    errno_text: str | None

# A path MTU black hole (src/detect/icmp.rs: black_hole()): a full-size data segment sent again and
# again and never acknowledged, while smaller packets got through or an ICMP error said it was too
# big. from: who sent it; len: its payload length; ip_len: the IP packet that carried it (headers,
# payload, the timestamp option if in use); mtu: the MTU a router announced, or None; frag_needed:
# an ICMP fragmentation-needed or packet-too-big error quoted it. Seen from the receiver's side
# (bytes that never arrived before a later segment did): vanished, those bytes, largest_through,
# the largest payload of the sender's that arrived, and len the full size the handshake's MSS
# allowed; both None otherwise.
_BlackHole = TypedDict("_BlackHole", {"from": _Side, "len": int, "ip_len": int, "mtu": int | None, "frag_needed": bool,
                                      "vanished": int | None, "largest_through": int | None})

class _LeanConnection(TypedDict):
    """What the findings read of a connection (`Analysis.connections(lean=True)`)."""

    id: int
    client: str
    server: str
    first_file: int
    first_frame: int
    first_time: float
    last_time: float
    outcome: Outcome
    symptoms: tuple[Symptom, ...]
    follows: int | None
    """The id of the connection on the same 4-tuple before it."""
    follows_after: float | None
    completed: bool
    syn_attempts: int
    synack_attempts: int
    synack_time: float | None
    ack_time: float | None
    request_acked: float | None
    request_sent: float | None
    """The client's first data (its SYN's when Fast Open data was taken)."""
    client_last_data: float | None
    server_first_data: float | None
    server_last_data: float | None
    client_closed: float | None
    """The client's first FIN or RST."""
    server_closed: _ServerClosed | None
    """The server's first FIN."""
    duplicates: int
    """Frames that were copies of the frame before them."""
    vlan: tuple[int, ...]
    """VLAN IDs, outer first; () untagged."""
    added_latency: float
    reset: _FirstRst | None
    series: tuple[Series, ...]
    icmp: list[_Icmp]
    """The ICMP errors that answered its packets ([] when none did)."""
    black_hole: _BlackHole | None
    """Its path MTU black hole, or None (the `mtu_black_hole` symptom)."""

class _Send(TypedDict):
    file: int
    frame: int
    time: float
    interval: float | None
    """Seconds since the previous send."""
    expected: float | None
    """Seconds the schedule predicts for that interval."""
    deviation: float | None
    triggered: bool

# A retransmission series of the JSON document; seq: relative sequence number, for data.
_SeriesDetail = TypedDict("_SeriesDetail", {
    "kind": SeriesKind, "from": _Side, "seq": int | None, "schedule": Schedule, "sends": list[_Send],
})

# One event of the JSON document; the keys after `win` only on the events they describe (a
# retransmission's attempt, a duplicate ACK's count, an RST's answer).
_Event = TypedDict("_Event", {
    "file": int, "frame": int, "time": float, "offset": float, "kind": EventKind, "from": _Side, "flags": str,
    "seq": int | None, "ack": int | None, "len": int, "win": int,
    "attempt": NotRequired[int], "original": NotRequired[_Frame], "since_previous": NotRequired[float],
    "after_handshake_ack": NotRequired[bool], "dup_count": NotRequired[int], "dup_of": NotRequired[_Frame],
    "answers": NotRequired[PacketRole | Literal["nothing"]], "answers_frame": NotRequired[_Frame],
    "after": NotRequired[float],
})

class _Isn(TypedDict):
    client: int | None
    server: int | None

class _Handshake(TypedDict):
    completed: bool
    syn_attempts: int
    synack_attempts: int
    syn_time: float | None
    synack_time: float | None
    ack_time: float | None
    duration: float | None
    """First SYN to the handshake ACK, seconds."""

class _Options(TypedDict):
    mss: int | None
    window_scale: int | None
    sack_permitted: bool
    timestamps: bool

class _SideCounts(TypedDict):
    packets: int
    payload_bytes: int
    data_retransmits: int
    dup_acks: int
    zero_windows: int
    unseen_segments: int
    fin: bool
    rst: bool
    options: _Options | None

class _Sides(TypedDict):
    client: _SideCounts
    server: _SideCounts

class _ConnectionChecks(TypedDict):
    held: list[CheckName]
    failed: list[CheckName]

class _Request(TypedDict):
    sent: float | None
    acked: float | None
    answered: float | None

class _Connection(TypedDict):
    """A connection of the JSON document (docs/json.md): `Analysis.connections()`, and
    `json.loads(Analysis.connection_json(i))`."""

    id: int
    client: str
    server: str
    ip_version: Literal[4, 6]
    vlan: NotRequired[list[int]]
    """Only for a connection captured on a VLAN."""
    partial: bool
    follows: int | None
    follows_after: float | None
    state: Literal["syn_sent", "syn_received", "established", "closing", "closed", "reset"]
    first_file: int
    first_frame: int
    first_time: float
    last_time: float
    duration: float
    isn: _Isn
    handshake: _Handshake
    sides: _Sides
    snaplen_cut: int
    duplicates: NotRequired[int]
    """Only when there were some."""
    outcome: Outcome
    symptoms: list[Symptom]
    checks: NotRequired[_ConnectionChecks]
    """Absent when the connection showed no sign the checks weigh."""
    request: _Request
    reset: _FirstRst | None
    added_latency: float
    series: list[_SeriesDetail]
    events: list[_Event]
    events_dropped: int
    icmp: NotRequired[list[_Icmp]]
    """Absent when no ICMP error answered its packets."""
    proxy_log: NotRequired[dict[str, object]]
    """In the JSON document only: what the proxy's log said (`note_connections`)."""

class _ServerStats(TypedDict):
    server: str
    connections: int
    outcomes: dict[Outcome, int]
    symptoms: dict[Symptom, int]
    first_time: float
    last_time: float
    answered: int
    binned_through: int | None
    one_syn: int
    packets: int
    data_retransmits: int
    resent_segments: int
    spurious_resends: int
    syn_to_synack: float | None
    synack_to_ack: float | None

class _PortPressure(TypedDict):
    client: str
    server: str
    peak: int
    at: float
    range: int
    error: int

class _OneSyn(TypedDict):
    connections: int
    answered_synack: int
    answered_rst: int
    sources: int
    sources_at_least: bool
    targets: int
    targets_at_least: bool
    top_sources: list[tuple[str, int]]
    top_targets: list[tuple[str, int]]
    first_time: float | None
    last_time: float | None
    frames: list[_Frame]

class _JoinFile(TypedDict):
    ties: int
    through: int
    zone: float
    zone_searched: bool
    skew: float | None
    skew_pairs: int

class _Silent(TypedDict):
    count: int
    ids: list[int]
    """At most 20."""

# (line, connection id, connection index, shape, (connect, first byte), (connect agrees, first
# byte agrees)).
_Tie = tuple[int, int, int, LogShape, tuple[float | None, float | None], tuple[bool | None, bool | None], list[int], int | None]

class _LogJoin(TypedDict):
    ties: list[_Tie]
    files: list[_JoinFile]
    silent: dict[LogShape, _Silent]
    capture: tuple[float, float]

class _Annotated(TypedDict):
    packets: int
    commented: int
    records: int
    connections: int

class _WhatifSettings(TypedDict):
    """One run's settings for `Analysis.whatif` (src/whatif/model.rs `Settings`)."""

    backlog: int
    workers: int
    syncookies: int
    synack_retries: int
    syn_retries: int
    syn_linear_timeouts: int
    client_timeout_s: float | None
    abort_on_overflow: bool

class _WhatifOutcome(TypedDict):
    connections: int
    answered: int
    failed: int
    failed_connecting: int
    failed_waiting: int
    failed_reset: int
    syn_retransmitted: int
    listen_overflows: int
    wait_p50_s: float | None
    wait_p99_s: float | None
    failed_range: tuple[int, int] | None
    """Replays (not the capture): the failed count of the middle 80 % of them."""
    syn_retransmitted_range: tuple[int, int] | None

class _WhatifResult(TypedDict):
    observed: _WhatifOutcome
    runs: list[_WhatifOutcome]

@final
class Analysis:
    """The result of one analysis, held in Rust."""

    def summary(self) -> _Summary:
        """Counts over the whole capture."""

    def captures(self) -> list[_CaptureInfo]:
        """One entry per input file, in the order given."""

    def skipped(self) -> dict[str, tuple[int, str]]:
        """Frames that were not usable TCP segments: {reason: (count, meaning)}."""

    def warnings(self) -> list[str]:
        """Sentences about anything that makes the result incomplete."""

    def __len__(self) -> int:
        """Number of connection records kept (0 with keep_connections=False)."""

    @overload
    def connections(
        self, *, problems_only: bool = False, lean: Literal[False] = False, server: str | None = None
    ) -> list[_Connection]: ...
    @overload
    def connections(
        self, *, problems_only: bool = False, lean: Literal[True], server: str | None = None
    ) -> list[_LeanConnection]: ...
    @overload
    def connections(
        self, *, problems_only: bool = False, lean: bool = False, server: str | None = None
    ) -> list[_Connection] | list[_LeanConnection]:
        """Connections as dicts shaped like the JSON document's (docs/json.md, `_Connection`): all
        those kept, or only those with a problem (an outcome other than completed or open, or a
        symptom). With keep_connections=False only connections with a problem were kept. `lean`:
        only the fields the findings read, flat (`_LeanConnection`): as the JSON document's, and
        request_sent, the client's first data (its SYN's when Fast Open data was taken);
        client_last_data, the last segment with new client data; server_first_data and
        server_last_data, likewise; client_closed, the client's first FIN or RST (epoch seconds
        or None each); server_closed, the server's first FIN ({file, frame, time}, or None);
        duplicates, frames that were copies of the frame before them; vlan, the VLAN IDs outer
        first, () untagged; series, `pcapq.lean.Series` tuples; icmp, the ICMP errors
        that answered its packets, as the JSON document's `icmp` (`_Icmp`; [] when none did);
        black_hole, its path MTU black hole (`_BlackHole`: who sent the full-size segment, its
        payload and IP lengths, the MTU an ICMP error announced or None, whether such an error
        quoted it) or None. Symptoms are the slugs of docs/diagnosis.md, including tfo_fallback,
        defer_accept_suspected and syn_after_rst.
        `server` ("ip:port", "[v6]:port"): only connections to that server.

        Raises:
            ValueError: `server` is not an endpoint.
        """

    def whatif(
        self, listener: str, capture_workers: int | None, runs: list[_WhatifSettings], seed: int = 0
    ) -> _WhatifResult:
        """The load offered to `listener` ("ip:port"), from an analysis that kept every connection:
        `observed`, what the capture shows, counted as a replay counts; `runs`, the load replayed
        with each of `runs`' settings (src/whatif), service draws seeded with `seed`.
        `capture_workers`, the workers the capture's server had, takes the wait for a worker out
        of the service times it showed.

        Raises:
            ValueError: the analysis did not keep every connection, or `listener` is not an endpoint.
            KeyError: a run lacks a setting.
        """

    def servers(self) -> list[_ServerStats]:
        """Per server endpoint: server, connections, outcomes, symptoms, first_time, last_time,
        answered, one_syn (connections that were one client SYN and nothing more), packets and
        data_retransmits (of its connections, both ways, copies left out), resent_segments and
        spurious_resends (data segments re-sent, and of them those a D-SACK or an early ACK showed
        spurious), syn_to_synack
        and synack_to_ack (median handshake gaps, seconds, or None), binned_through (None, or the
        epoch second up to which its waits and answers are counted per second: `waiting_at` and
        `answered_between` there are estimates, off by at most the connections of the second a
        time falls in; docs/performance.md)."""

    def worst(self, n: int) -> tuple[int, list[_LeanConnection]]:
        """How many connections have a problem (also those beyond the records kept), and the `n`
        worst of the records kept as lean dicts, worst first: failed outcomes, then any symptom,
        then the most added latency, then the earliest."""

    def worst_rows(
        self, n: int
    ) -> tuple[int, list[tuple[int, int, str, str, Outcome, tuple[Symptom, ...], float, float, float, int, int]]]:
        """`worst`, each connection as a table row: (index, id, client, server, outcome, symptoms,
        first_time, last_time, added_latency, first_file, first_frame); `index` is its place in
        `connections()`."""

    def problems(self) -> Problems:
        """The problem connections per listener, in episodes, each reduced to its marks: what
        the diagnosis's rules count and select over (docs/diagnosis.md)."""

    def waiting_at(self, server: str, times: list[float]) -> list[int]:
        """At each time, how many connections to `server` its clients considered established
        while it had not answered them yet.

        Raises:
            KeyError: no such server.
        """

    def port_pressure(self) -> list[_PortPressure]:
        """Per (client address, server endpoint), highest first: client, server, peak (source
        ports held at once, in use or in TIME-WAIT), at (when), range (28232, Linux's default
        ephemeral port range), error (how much too high peak can be: 0 unless the pair's
        spans were counted per second, docs/performance.md)."""

    def one_syn(self) -> _OneSyn:
        """Connections that were one client SYN and nothing more (a SYN flood, a port scan), in
        aggregate: connections, answered_synack, answered_rst, sources, sources_at_least,
        targets, targets_at_least, top_sources and top_targets ([(address or endpoint, count)],
        most first), first_time, last_time (epoch seconds or None), frames ([{file, frame}])."""

    def answered_between(self, server: str, start: float, end: float) -> int:
        """How many connections `server` answered (first data) between start and end.

        Raises:
            KeyError: no such server.
            ValueError: `server` is not an endpoint.
        """

    def timeline(self, server: str | None = None) -> _Timeline:
        """Per-second counts over every connection (also those not kept), as columns of equal
        length: seconds (epoch, rounded down; only seconds that saw anything), new (outcome ->
        connections whose first packet fell in that second), retransmissions (SYN, SYN-ACK and
        data), waiting_in / waiting_out (connections that began / stopped waiting for the
        server's answer after the client's handshake ACK). Merged analyses sum them.
        `server` ("ip:port", "[v6]:port"): only connections to that server.

        Raises:
            ValueError: `server` is not an endpoint.
        """

    def join_log(
        self,
        times: list[float],
        files: list[int],
        upstreams: list[str | None],
        local_ports: list[int | None],
        timings: list[tuple[float | None, float | None]],
        kinds: list[str],
        resolutions: list[float],
        zones: list[float | None],
        starts: list[float | None] | None = None,
        via: list[int | None] | None = None,
    ) -> _LogJoin:
        """Ties log lines to the connections they describe (docs/evidence.md). Line i is at
        times[i] (epoch seconds on the log's clock, read as UTC), in file files[i], about
        upstream upstreams[i] (an endpoint, or None for any), from the proxy's source port
        local_ports[i] (None: not said; said, the tie is exact), with the attempt's connect time
        and time to the first byte as the proxy measured them timings[i] (seconds or None: a
        connection whose own differ is tied only when no other fits), of kind kinds[i] (a LogKind). Per
        file: resolutions[file] (seconds a line's time stands for) and zones[file] (log clock
        minus UTC when the file says so; None: searched by quarter hours). starts[i]: when the
        attempt began on the log's clock (None: not said to the millisecond); via[i]: the line of
        the same request in another file, whose connection line i is tied to when its kind fits
        (either list None: none).

        Returns: {"ties": [(line, connection id, connection index, LogShape, (connect, first
        byte), (connect agrees, first byte agrees), ambiguous with, through)] (seconds from the
        first SYN to the handshake's ACK and to the server's first byte, or None; whether the
        line's timings agree with them, or None; ids of the connections the line fits as well;
        the line it was tied through, or None), "files": [{"ties", "through",
        "zone", "zone_searched", "skew", "skew_pairs"}], "silent": {LogShape: {"count", "ids"}}
        (failed connections no line describes), "capture": (first, last)}.

        Raises:
            ValueError: the arrays differ in length, a kind is unknown or an upstream is not an endpoint.
        """

    def note_connections(self, notes: dict[int, str]) -> None:
        """Adds fields to connections in the JSON document: connection id -> a JSON object
        string whose fields are added (`proxy_log`).

        Raises:
            ValueError: a value is not a JSON object.
        """

    def connection_json(self, index: int) -> str:
        """Connection `index` (in order of first packet) as a JSON object.

        Raises:
            IndexError: no such connection.
        """

    def write_annotated(
        self,
        paths: list[str],
        output: str,
        ids: list[int] | None,
        findings: list[tuple[str, list[int]]],
        section: str,
    ) -> _Annotated:
        """Writes the capture `paths` (the files this analysis read, in that order) back as
        pcapng at `output`: every record kept, bytes, timestamps and frame numbers unchanged,
        pcapq's words (`connection_labels`, prefixed "pcapq: ") as packet comments on the
        packets of the connections kept (only those of `ids` when given), `section` on each
        section header. `findings`: (title, connection ids) of each finding; the first packet
        of each connection with a problem says its outcome, symptoms and finding. Returns
        {"packets", "commented", "records", "connections"}.

        Raises:
            CaptureError: an input could not be opened or broke off (the output then holds
                the records before the break).
            OSError: the output could not be written.
        """
        ...

    def connection_labels(self, index: int) -> list[tuple[int, int, str]]:
        """What each labelled packet of connection `index` means, in plain words, as
        (file, frame, text): one per event of `connection_json(index)["events"]`, in that
        order, then one per ICMP error of its `icmp`, in that order. A packet with two events
        (data with a FIN) has two. The words of `pcapq timeline`'s notes and of the packet
        comments `pcapq annotate` writes.

        Raises:
            IndexError: no such connection.
        """

    def merge(self, later: Analysis) -> Analysis:
        """Joins the analysis of the capture that came right after this one.

        `later` must come from ``analyze(..., mergeable=True)``. Connections spanning the
        boundary become one; file indices of `later` follow this one's. Both inputs are
        used up (empty afterwards). Both must keep every connection, or neither; an analysis
        that did not keep them must be mergeable and not read yet (reading counts its open
        connections as if its capture ended there).

        Raises:
            ValueError: one kept its connections and the other did not, `later` is not
                mergeable, or an analysis without its connections was already read.
        """

    def to_bytes(self) -> bytes:
        """The analysis as compact, versioned bytes, for another process to merge (a Dask
        worker's partial result). Pickling uses the same bytes."""

    @staticmethod
    def from_bytes(data: bytes) -> Analysis:
        """The analysis `to_bytes` serialised.

        Raises:
            ValueError: not a serialised analysis, damaged, or written by a pcapq with
                another serialisation format (the message names both versions).
        """

    def __reduce__(self) -> tuple[Callable[[bytes], Analysis], tuple[bytes]]: ...
    def write_json(
        self, target: str | os.PathLike[str] | _TextFile, pretty: bool = False, extra: str | None = None
    ) -> None:
        """Writes the whole JSON document (docs/json.md) to a path or a text file object.
        `extra`, a JSON object's text, adds its fields before `connections`.

        Raises:
            OSError: the path cannot be written (errno, message, path); an exception raised
                by the file object's write() propagates unchanged.
            ValueError: `extra` is not a JSON object.
        """
    def felt(self, ids: list[int]) -> _Felt:
        """What users felt of the connections with `ids` (src/detect/felt.rs)."""

    def proxy_timeouts(self) -> dict[Literal["connect", "read"], _ProxyTimeout]:
        """The proxy's timeouts inferred from when its connections gave up: "connect" and
        "read", each absent when the capture does not show it."""

    def inferred_settings(self) -> dict[str, _InferredSettings]:
        """The settings the capture shows (src/detect/settings), per listener ("ip:port",
        "[v6]:port") that shows any: the listener, then each setting shown, in the order of
        `_InferredSettings`; a setting the capture does not show is absent."""

class _Felt(TypedDict):
    connections: int
    """Of the ids asked for, those among the records kept."""
    failed: int
    """With a failed outcome (refused, reset, timed out, given up, unreachable, closed by the server
    while the client waited: not one that stayed open and silent 1 s after the server's FIN)."""
    delayed: int
    """Not failed, and waited on re-sends at least `threshold`."""
    resends: int
    """Packets sent again (SYNs, SYN-ACKs, data)."""
    waited: float
    """Seconds lost to re-sends, added up over the connections."""
    longest: float
    """The longest of those waits, seconds."""
    threshold: float
    """The wait that is material in this capture, seconds: the largest of Linux's minimum RTO
    (200 ms) and four median handshake round trips."""

class _InferredSetting(TypedDict):
    value: int | float | bool | None
    """The setting, or None when only a range is shown."""
    low: int | float | None
    """The least it can be (None: no lower bound shown)."""
    high: int | float | None
    """The most it can be (None: no upper bound shown)."""
    confidence: float
    evidence: list[str]
    """What it rests on, in words, most telling first."""

class _InferredSettings(TypedDict):
    listener: str
    backlog: NotRequired[_InferredSetting]
    """The effective backlog: listen()'s after the net.core.somaxconn clamp."""
    workers: NotRequired[_InferredSetting]
    """How many requests the server served at once."""
    syncookies: NotRequired[_InferredSetting]
    """net.ipv4.tcp_syncookies on (True) or off (False)."""
    synack_retries: NotRequired[_InferredSetting]
    """net.ipv4.tcp_synack_retries."""
    syn_retries: NotRequired[_InferredSetting]
    """The clients' net.ipv4.tcp_syn_retries."""
    syn_linear_timeouts: NotRequired[_InferredSetting]
    """The clients' net.ipv4.tcp_syn_linear_timeouts."""
    client_timeout_s: NotRequired[_InferredSetting]
    """When the clients gave up on an answer, seconds."""

class _ProxyTimeout(TypedDict):
    seconds: float
    connections: int
    gave_up: int
    measured: bool
    range: tuple[float, float] | None
    """(above, at most) seconds where every give-up's FIN was held back behind its request."""

class _Scan(TypedDict):
    source: str
    target: str
    ports: int
    probes: int
    open: int
    refused: int
    first_time: float
    last_time: float
    frames: list[_Frame]

class _Timings(TypedDict):
    syn_schedules: dict[Schedule, int]
    syn_series: int
    first_syn_retry: float | None
    synack_series: int
    synack_retries: int
    synack_cut_short: int
    first_rto: float | None
    first_rto_series: int
    pmtu_discovered: int
    pmtu_mtu: int | None

@final
class Problems:
    """The problem connections of one analysis, per listener (`Analysis.problems()`)."""

    def servers(self) -> list[str]:
        """Server endpoints with at least one problem connection, in order."""

    def episodes(self, server: str) -> list[Episode]:
        """The episodes of `server`, in time order.

        Raises:
            ValueError: `server` is not an endpoint.
        """

    def scans(self) -> list[_Scan]:
        """Sources that probed many ports of one address, busiest first."""

    def examples(self, selection: Selection, limit: int) -> list[_LeanConnection]:
        """Up to `limit` of the selection's connections, earliest first, as lean dicts."""

    def timings(self) -> _Timings:
        """What the retransmission series of the problem connections show of the kernels' settings."""

    def earliest_ack(self, selection: Selection) -> float | None:
        """The earliest handshake ACK among the selection's connections (epoch seconds)."""

@final
class Episode:
    """One listener's problem connections close together in time."""

    @property
    def server(self) -> str: ...
    @property
    def first(self) -> float: ...
    @property
    def last(self) -> float: ...
    def __len__(self) -> int:
        """Its connections (a group of alike ones merged in short form counts as all of them)."""
    def count(self, all_of: list[Mark] = ..., any_of: list[Mark] = ..., none_of: list[Mark] = ..., claimed: bool = False) -> int:
        """How many connections match (see `select`)."""

    def select(self, all_of: list[Mark] = ..., any_of: list[Mark] = ..., none_of: list[Mark] = ..., claimed: bool = False) -> Selection:
        """The connections with every mark of `all_of`, one of `any_of` (if given) and none of
        `none_of`; only those no earlier rule claimed, unless `claimed`.

        Raises:
            ValueError: a name is not a mark.
        """

    def union(self, a: Selection, b: Selection) -> Selection:
        """The connections of either selection (both of this episode)."""

    def among(self, selection: Selection, ids: set[int], keep: bool = True) -> Selection:
        """The selection's connections whose id is among `ids` (`keep`), or those whose id is
        not. What a rule reads of facts the core did not mark (two capture points aligned,
        pcapq.two_points)."""

    def claim(self, selection: Selection) -> None:
        """Marks the selection's connections as explained: later selections leave them out."""

@final
class Selection:
    """Connections of one episode that a rule selected."""

    def __len__(self) -> int:
        """Its connections: more than `ids` when problem connections beyond the records kept
        were merged in short form (`analyze(max_kept_problems=...)`)."""
    def __bool__(self) -> bool: ...
    @property
    def ids(self) -> list[int]:
        """Connection ids, ascending: one per connection, or per group of alike connections
        merged in short form."""
    @property
    def first(self) -> float | None: ...
    @property
    def last(self) -> float | None: ...
    @property
    def checks(self) -> dict[CheckName, tuple[int, int]]:
        """Per check the capture could test on these connections: in how many it held, in how
        many it failed."""

def analyze(
    paths: list[str],
    *,
    keep_connections: bool = True,
    keep_events: bool = True,
    mergeable: bool = False,
    max_connections: int = 0,
    max_kept_problems: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> Analysis:
    """Reads the captures in order, as one capture ("-" is stdin), and rebuilds every TCP connection.

    keep_connections: keep every connection's record; off, a finished connection is only
        counted in the summary, so memory follows the connections live at once.
    keep_events: keep the events of each connection kept (needed for JSON and ladders): of
        every connection, or with keep_connections=False of those with a problem.
    mergeable: keep what `Analysis.merge` needs to join this onto the capture before.
        Without keep_connections, the records of connections live at the end or able to
        join the capture before are kept uncounted until the analysis is first read.
    max_connections: at most this many connections live at once (0: no limit); beyond it the
        longest idle are finalised early and a warning says how many.
    max_kept_problems: with keep_connections=False, at most this many records of problem
        connections are kept whole (None: 20,000), for the findings' examples and the worst
        connections; the findings count the others from a short form of each, and a warning
        says how many.
    progress: called with the bytes of capture records read so far (headers and data, after
        decompression), every 4 MiB and once at the end; an exception it raises is raised
        when reading ends.

    Raises:
        CaptureError: a file cannot be opened or is not a capture.
        InternalError: a bug in pcapq's core.
    """

def analyze_many(
    captures: list[list[str]],
    *,
    jobs: int = 0,
    keep_connections: bool = True,
    keep_events: bool = True,
    max_connections: int = 0,
    progress: Callable[[int, int], object] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> list[Analysis]:
    """Analyses several captures, each a list of files read in order as one capture (as
    `analyze` does), on `jobs` threads (0: one per core), with the GIL released. The analyses
    come back in the order of `captures`. `progress(index, bytes)`: as `analyze`'s, for
    `captures[index]`. With `spill_dir`, every connection is counted as it finishes and its
    record handed to a temporary file in that directory (unlinked at once) instead of being
    kept in memory: `write_json` and `write_parquet` read them from there (`keep_connections`
    is then off).

    Raises:
        CaptureError: the first capture (in order) with a file that cannot be opened or is
            not a capture.
        InternalError: a bug in pcapq's core.
    """

def analyze_parts(
    paths: list[str],
    *,
    jobs: int = 0,
    keep_connections: bool = True,
    keep_events: bool = True,
    max_connections: int = 0,
    max_kept_problems: int | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> list[Analysis]:
    """Analyses each file on its own as a mergeable part, on `jobs` threads (0: one per core),
    with the GIL released. The parts come back in the order of `paths`; join them in time
    order with `Analysis.merge`. `progress(index, bytes)`: as `analyze`'s, for `paths[index]`.

    Raises:
        CaptureError: the first file (in order) that cannot be opened or is not a capture.
        InternalError: a bug in pcapq's core.
    """

class _WatchInterval(TypedDict):
    server: str
    connections: int
    """Connections whose first SYN arrived in the interval."""
    answered: int
    """Connections the server answered for the first time."""
    failed: int
    """Connections that ended without the server's answer: refused, reset, or closed by the client."""
    signs: dict[LiveSign, int]
    """Segments showing each sign (only signs seen)."""

class _WatchEvent(TypedDict):
    kind: EpisodeEventKind
    server: str
    time: float
    """When it was seen to open (its first sign), to recover, or to be still open (epoch seconds)."""
    first_time: float
    """Its first sign (epoch seconds)."""
    last_time: float
    """Its last sign so far."""
    signs: list[LiveSign]
    """The signs it showed so far; for "new_signs", those it had not shown before."""
    connections: int
    """Connections that showed a sign or failed while it was open."""

class _WatchLook(TypedDict):
    servers: list[_WatchInterval]
    """The busiest listeners of the interval, busiest first."""
    more_servers: int
    events: list[_WatchEvent]
    events_dropped: int
    open: int
    """Episodes open now."""
    episodes_forgotten: int
    """Open episodes forgotten since the last look: the oldest of more than 4,096 open at once
    (listeners that never answered again)."""
    latest_time: float | None
    segments: int
    """TCP segments tracked so far."""

class _Histogram(TypedDict):
    counts: list[int]
    """Per bucket (`_MetricsSnapshot["buckets"]`, then +Inf), not cumulative."""
    sum: float
    """Seconds."""
    count: int

class _MetricsReset(TypedDict):
    side: Literal["client", "server"]
    """Who sent the connection's first RST."""
    answered: ResetAnswer
    count: int

class _ListenerMetrics(TypedDict):
    listener: str
    """The server endpoint ("10.0.0.2:9000", "[2001:db8::2]:443"), or "other": every listener not named."""
    connections: int
    """Connections whose first SYN arrived."""
    answered: int
    """Connections the server answered (its first data)."""
    ended: dict[Outcome, int]
    """Connections that ended (left the tracker, or the input ended), by outcome; every outcome."""
    signs: dict[LiveSign, int]
    """Segments showing each sign; every sign."""
    resets: list[_MetricsReset]
    """Connections reset, by who sent the first RST and what it answered; only nonzero."""
    icmp: dict[IcmpKind, int]
    """ICMP errors tied to its connections, by kind; only nonzero."""
    handshake_seconds: _Histogram
    """First SYN to the client's handshake ACK."""
    first_byte_seconds: _Histogram
    """First SYN to the server's first data."""
    retransmission_delay_seconds: _Histogram
    """Per connection, once answered or ended: from its first SYN to the copy answered plus from its request's
    first copy to the copy acknowledged; only when more than zero."""
    waiting: int
    """A gauge: connections established for the client and not answered, reset or closed yet."""
    episode_open: bool
    episode_signs: list[LiveSign]

class _MetricsSnapshot(TypedDict):
    segments: int
    """TCP segments tracked so far."""
    latest_time: float | None
    """The latest packet's time (epoch seconds, the capture's clock)."""
    dropped: int | None
    """Packets the capture says were dropped (pcapng Interface Statistics Blocks, which tools write
    as they stop: known once the input ended); None if it never said."""
    listeners_other: int
    """Distinct unnamed listeners with a connection in this or the last 60 s period (approximately)."""
    buckets: list[float]
    listeners: list[_ListenerMetrics]
    """Named listeners by endpoint, then "other" if it counted anything."""

@final
class LiveInput:
    """Standard input as it is being read by `analyze_stdin`: what arrived so far, and a way to
    end the input early. Read from any thread while `analyze_stdin` works on another."""

    def __new__(cls) -> LiveInput: ...
    @property
    def bytes(self) -> int:
        """Bytes that arrived on standard input so far."""
    @property
    def packets(self) -> int | None:
        """Capture records that arrived so far, or None for a compressed stream."""
    @property
    def stopped(self) -> bool:
        """True once `stop` was called."""
    @property
    def ended(self) -> bool:
        """True when the writer closed the input."""
    @property
    def replaced(self) -> bool:
        """True when a followed file ended because tcpdump started over: its path names another
        file now, or the file shrank."""
    def stop(self, now: bool = False) -> None:
        """Ends the input: after what the writer still sends within half a second (at most
        3 s), or at once with `now`. The analysis then settles what was read."""
    def look(self, max_servers: int = 8, end: bool = False) -> _WatchLook:
        """What happened since the last look (`analyze_stdin(..., watch=True)` only; empty
        otherwise): the `max_servers` busiest listeners of the interval, the episodes that
        opened or recovered, and with `end` those still open. Starts a new interval."""
    def metrics(self) -> _MetricsSnapshot:
        """Per listener, counts since the start (`analyze_stdin(..., watch=True)` only; no
        listener otherwise), for a Prometheus exporter. Costs what the listeners do."""

def analyze_stdin(
    live: LiveInput,
    *,
    keep_connections: bool = True,
    keep_events: bool = True,
    max_connections: int = 0,
    watch: bool = False,
    spill_dir: str | os.PathLike[str] | None = None,
    metrics_listeners: int = 20,
    follow: str | os.PathLike[str] | None = None,
    keep_s: float | None = None,
) -> Analysis:
    """Reads standard input live as one capture (as ``analyze(["-"])``), or with `follow` the
    capture file tcpdump is writing there (waiting for more at its end, ending when tcpdump
    starts over: ``live.replaced``), until its end or ``live.stop()``, with the GIL released;
    with `watch`, each segment is tracked as it arrives, ``live.look()`` tells what happened
    and ``live.metrics()`` the counts since the start, at most `metrics_listeners` listeners
    named (the rest summed as "other"). With `spill_dir`, every connection goes, as it
    finishes, to a temporary file there instead of memory (as ``analyze_many``'s). With
    `keep_s`, the analysis covers the connections counted in the last `keep_s` seconds of
    capture time (to within a quarter of it), and its summary's ``all_time`` every connection
    since the start.

    Raises:
        CaptureError: standard input (or `follow`) is not a capture, or `follow` cannot be opened.
        ValueError: `keep_s` is below 1 s.
        InternalError: a bug in pcapq's core.
    """

def write_parquet(
    target: str | os.PathLike[str], points: list[tuple[Analysis, str, str]], *, directory: bool = False
) -> None:
    """Writes the Parquet tables (docs/parquet.md) of `points`, each `(analysis, capture point
    name, findings)` with its findings as the JSON document's `findings` array in precedence
    order (a connection that several findings list gets the cause of the first). `target` is the
    connections file, or with `directory` the directory that gets `connections.parquet`,
    `events.parquet` and `findings.parquet`. Each analysis must hold every connection (kept, or
    handed to a sink with `spill_dir`).

    Raises:
        ValueError: an analysis kept only the connections with a problem, or the findings are not
            a JSON array of findings.
        OSError: a file could not be written.
    """

_Direction = Literal["client_to_server", "server_to_client"]

class _Delays(TypedDict):
    packets: int
    min: float
    mean: float
    spread: float
    max: float

class _PathDelays(TypedDict):
    client_to_server: _Delays
    server_to_client: _Delays

class _VanishedCounts(TypedDict):
    client_to_server: int
    server_to_client: int

class _LossSecond(TypedDict):
    second: int
    client_to_server: int
    server_to_client: int

class _Vanished(TypedDict):
    direction: _Direction
    seq: int
    len: int
    flags: str
    time: float
    seen_at: str
    missing_at: str
    vanished: Literal["between_points", "before_first_point"]
    file: int
    frame: int

class _PathConnection(TypedDict):
    client: dict[str, str | None]
    server: dict[str, str | None]
    ids: dict[str, int | None]
    vanished_client_to_server: int
    vanished_server_to_client: int
    vanished: list[_Vanished]

class _Path(TypedDict):
    points: list[str]
    client_side: str | None
    clock_offset: float
    offset_at: float | None
    drift_ppm: float | None
    offset_uncertainty: float | None
    offset_windows: int
    matched_packets: int
    packets: dict[str, int]
    vanished_packets: _VanishedCounts
    one_point_only: dict[str, int]
    resegmented: dict[str, int]
    translated: bool
    delays: _PathDelays | None
    loss_per_second: list[_LossSecond]
    connections: list[_PathConnection]

def align_points(
    first: list[str], second: list[str], names: tuple[str, str], analyses: tuple[Analysis, Analysis] | None = None
) -> tuple[_Path, list[int], list[int]]:
    """Aligns the captures of two points, `first` and `second` (each its files in time order),
    named `names` in the report (docs/two-points.md). With `analyses` (the two points'
    analyses, in the same order), connections are named by their ids there (where the analysis
    keeps them). Returns (the JSON `paths` entry, the ids at the first point of the connections
    it shares with the second, the same at the second).

    Raises:
        CaptureError: a file cannot be opened or is not a capture.
        InternalError: a bug in pcapq's core.
    """

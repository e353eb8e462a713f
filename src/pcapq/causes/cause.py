"""What a cause of failure is: its words, its advice, where it applies, its rule, when a
finding of it matters (`Materiality`), what the server's counters and listeners say of it
(`CounterSigns`, `ListenerSign`) and what `pcapq explain` adds to its stories (`Narration`).

One module per cause holds one `Cause`; `pcapq.causes.registry` lists the modules. Everything
that names causes (the CLI's choices, report titles, explain and lab wording, the evidence's
verdicts, the table in docs/diagnosis.md) reads them from there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence, Union

if TYPE_CHECKING:
    # For the type checker only: at run time `Callable[["CaptureContext"], ...]` compiles its
    # forward references at every start-up.
    from typing import Callable, Literal, Optional

    from pcapq._core import LiveSign, _Connection, _ServerStats
    from pcapq.causes.context import CaptureContext, EpisodeContext
    from pcapq.finding import Finding
    from pcapq.evidence.counters import Listener

    Scope = Literal["capture", "episode", "server", "evidence"]

    CaptureRule = Callable[[CaptureContext], Sequence[Finding]]
    EpisodeRule = Callable[[EpisodeContext], Optional[Finding]]


@dataclass(frozen=True)
class Materiality(ABC):
    """When a finding of a cause earns a panel in the reports (it is *material*); a finding below
    goes to the one table of minor observations instead (docs/diagnosis.md, "Materiality").
    Each cause declares one, next to its rule, with the reason for its numbers."""

    reason: str
    """Why this threshold, in one line (docs/diagnosis.md)."""

    @abstractmethod
    def judge(self, finding: Finding, capture: CaptureContext, connections: int) -> str | None:
        """None when the finding is material, else the short reason it is minor. `connections`:
        the capture's own traffic, its connections less those a port scan's or a SYN flood's
        findings count (`pcapq.diagnose.findings.judge_materiality`)."""

    @abstractmethod
    def words(self) -> str:
        """The threshold in words (docs/diagnosis.md)."""


@dataclass(frozen=True)
class Always(Materiality):
    """Every finding whose users felt it is material: the rule's own evidence is already the
    threshold. `felt` False: its evidence is no user's connection (a scan, a flood, a port range
    full), material whatever its connections' fate."""

    felt: bool = True

    def judge(self, finding: Finding, capture: CaptureContext, connections: int) -> str | None:
        if not self.felt:
            return None
        return Felt.of(finding, capture).unfelt()

    def words(self) -> str:
        return "some connections failed or waited" if self.felt else "always"


@dataclass(frozen=True)
class Connections(Materiality):
    """Material when at least `at_least` of its connections failed or waited materially longer
    (`Felt`), or at least `share` of the capture's own connections did (one failure among many
    healthy connections is minor; a capture whose main traffic is that failure keeps it)."""

    at_least: int
    share: float

    def judge(self, finding: Finding, capture: CaptureContext, connections: int) -> str | None:
        felt = Felt.of(finding, capture)
        unfelt = felt.unfelt()
        if unfelt is not None:
            return unfelt
        n, total = felt.users, connections
        if n >= self.at_least or n >= self.share * total:
            return None
        return f"{felt.who(total)}: fewer than {self.at_least} and under {_percent(self.share)}"

    def words(self) -> str:
        return (f"at least {self.at_least} connections failed or waited, or at least {_percent(self.share)} of the "
                "capture's own")


@dataclass(frozen=True)
class Resends(Materiality):
    """Material when some of its connections failed or waited materially longer (`Felt`), and
    those are at least `share` of the capture's own connections, or its server (every endpoint of
    a folded finding) re-sent at least `at_least` data segments and at least `rate` of its
    packets (both ways)."""

    share: float
    rate: float
    at_least: int

    def judge(self, finding: Finding, capture: CaptureContext, connections: int) -> str | None:
        felt = Felt.of(finding, capture)
        unfelt = felt.unfelt()
        if unfelt is not None:
            return unfelt
        n, total = felt.users, connections
        if n >= self.share * total:
            return None
        resent = packets = 0
        for server in finding_servers(finding, capture):
            resent += server["data_retransmits"]
            packets += server["packets"]
        if resent >= self.at_least and resent >= self.rate * packets:
            return None
        where = felt.who(total)
        if resent == 0:
            return f"{where}, only SYNs re-sent"
        if resent < self.at_least:
            return f"{where}, {resent:,} data re-send{'' if resent == 1 else 's'} (fewer than {self.at_least})"
        return f"{where}, {resent:,} of {packets:,} packets re-sent (under {_percent(self.rate)})"

    def words(self) -> str:
        return (f"some connections failed or waited, and those at least {_percent(self.share)} of the capture's own, "
                f"or its server's data re-sends at least {self.at_least} and at least {_percent(self.rate)} of its "
                "packets")


@dataclass(frozen=True)
class Felt:
    """What users felt of a finding's connections (`Analysis.felt`, counted in the core): those
    that failed (refused, reset, timed out, given up), and those that waited on re-sends at least
    the capture's material wait (the largest of Linux's minimum RTO, 200 ms, and four median
    handshake round trips)."""

    connections: int
    """The finding's connections."""
    failed: int
    delayed: int
    resends: int
    waited: float
    threshold: float
    judged: bool
    """False: some of its connections are not among the records kept (a finding read from
    aggregates, or beyond `analyze(max_kept_problems=...)`): judged by its count alone, as if each
    failed, so that the verdict does not hang on which records were kept."""

    @staticmethod
    def of(finding: Finding, capture: CaptureContext) -> Felt:
        n = finding.connection_count
        f = capture.analysis.felt(finding.connections)
        if f["connections"] < n:
            return Felt(n, n, 0, f["resends"], f["waited"], f["threshold"], judged=False)
        return Felt(n, f["failed"], f["delayed"], f["resends"], f["waited"], f["threshold"], judged=True)

    @property
    def users(self) -> int:
        """Connections whose users felt the finding: failed or delayed."""
        return self.failed + self.delayed

    def unfelt(self) -> str | None:
        """Why no user felt the finding (its minor reason), or None when some did."""
        if self.users or not self.judged:
            return None
        cost = f"{self.resends:,} re-send{'' if self.resends == 1 else 's'}, {_duration(self.waited)} added"
        return f"{_connections(self.connections)}, none failed or waited {_duration(self.threshold)}: {cost}"

    def who(self, total: int) -> str:
        """"2 of 500 connections failed", "1 of 9 connections waited 200 ms or more"."""
        did = [what for n, what in ((self.failed, "failed"), (self.delayed, f"waited {_duration(self.threshold)} or more"))
               if n]
        return f"{self.users:,} of {total:,} connection{'' if total == 1 else 's'} {' or '.join(did)}"


def finding_servers(finding: Finding, capture: CaptureContext) -> list[_ServerStats]:
    """The server counters (`Analysis.servers()`) of the finding's endpoint, or of every endpoint
    a folded finding lists (`details.endpoints`: its busiest 20)."""
    endpoints = [finding.server] + [e for e, _ in finding.details.get("endpoints", ())]
    return [s for s in map(capture.server, endpoints) if s is not None]


def _connections(n: int) -> str:
    return f"{n:,} connection{'' if n == 1 else 's'}"


def _percent(share: float) -> str:
    return f"{share:.0%}"


def _duration(seconds: float) -> str:
    """"3 ms", "1.2 s"."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


@dataclass(frozen=True)
class CounterSigns:
    """What the server's kernel counters (nstat or netstat -s, read with --nstat) say of a finding
    of the cause (`pcapq.evidence`)."""

    rise: tuple[str, ...]
    """Counters, as nstat names them, whose rise confirms the finding: each one that rose is
    said in its `confirmed_by`."""
    none_rose: str = ""
    """When none of them rose and some read flat: why that contradicts the finding, said after
    the flat ones in its `contradicted_by`; empty: it does not."""
    cleared: Callable[[Finding, list[str]], None] | None = None
    """When none of them rose and some read flat: what the finding becomes instead (given the
    sentences saying which stayed flat)."""
    cleared_says: str = ""
    """What `cleared` makes of the finding, in words (docs/evidence.md)."""


@dataclass(frozen=True)
class ListenerSign:
    """What `ss -lnt` on the server (read with --ss) says of a finding of the cause (`pcapq.evidence`)."""

    listening: bool
    """True: the finding needs a listener on its endpoint, and none there contradicts it. False:
    the finding says nothing listens there: none confirms it, one contradicts it."""
    weigh: Callable[[Finding, Listener, str], None] | None = None
    """With a listener there: sets what its queue says for or against the finding; the string
    is ss's line in words ("ss: 10.0.0.2:9000 Recv-Q 129, Send-Q 128 (backlog)")."""


@dataclass(frozen=True)
class SynDropped:
    """Why a listener dropped a SYN, and the queue that did it, as `pcapq explain` tells a SYN
    sent again with no answer."""

    why: str
    queue: str


@dataclass(frozen=True)
class Narration:
    """What `pcapq explain` (`pcapq.teach.narrate`) says of a connection of a finding of the
    cause, beyond what its packets say."""

    nstat: tuple[str, ...] = ()
    """Counters the story's ending asks the reader to check on the server (`nstat -az`)."""
    syn_dropped: SynDropped | None = None
    """Why a SYN went again unanswered, when no SYN-ACK went out and no ICMP error came."""
    application_saw: Callable[[_Connection], str | None] | None = None
    """What the applications saw, when the cause knows better than the connection's outcome;
    None from it: the outcome says."""


@dataclass(frozen=True)
class Cause:
    """A cause pcapq can name: its words, scope, precedence and rule."""

    slug: str
    """Stable name, in JSON and on the command line."""
    title: str
    """For headings: "Accept queue overflow"."""
    phrase: str
    """For sentences: "an accept queue overflow"."""
    advice: str
    """What to change."""
    scope: Scope
    """What one finding covers: the whole capture, one episode of one listener, or one listener;
    "evidence": found in the proxy's logs alone (`pcapq.evidence`), never in a capture."""
    precedence: int
    """Rules run in this order, lowest first; an earlier rule's claims hide connections from later ones."""
    rule: Union[CaptureRule, EpisodeRule]
    evidence: str
    """The positive evidence the rule needs, in words (docs/diagnosis.md)."""
    materiality: Materiality
    """When one of its findings earns a panel; below it is a minor observation."""
    exclusions: Sequence[str] = ()
    """What the rule checks is not the case, in words."""
    disproved_by: Sequence[str] = ()
    """What would show the finding wrong: said with every finding."""
    proxy_log: Sequence[str] = field(default_factory=tuple)
    """Keys of `pcapq.causes.proxy_log.LINES` the proxy probably logged."""
    confidence: str = ""
    """How sure the rule is, and when, in words (docs/diagnosis.md)."""
    kernel: str = ""
    """The kernel function or RFC section the rule rests on."""
    live_signs: Sequence[LiveSign] = ()
    """Signs (`_core.LiveSign`) that, seen on a capture watched live (`pcapq watch`), point to
    this cause alone: the live lines say "signs of" it, never that it is the cause."""
    counters: CounterSigns | None = None
    """The kernel counters that confirm or contradict a finding; None: none bears on it."""
    listener: ListenerSign | None = None
    """What a listener on the finding's endpoint, or none, says of it; None: nothing."""
    narration: Narration = field(default_factory=Narration)


@dataclass(frozen=True)
class CaptureCause(Cause):
    """A cause whose rule reads the whole capture: scopes "capture", "server" and "evidence"."""

    rule: CaptureRule


@dataclass(frozen=True)
class EpisodeCause(Cause):
    """A cause whose rule weighs one episode of one listener: scope "episode"."""

    rule: EpisodeRule

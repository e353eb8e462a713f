"""A finding: one cause, where and when, how sure and why, what it rests on and what would
disprove it, the frames to open, and what to change. The causes make findings and the diagnosis
gathers them: this package is below both, and imports only the core (and, for the type checker,
pcapq.two_points)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from pcapq._core import CheckName, Mark
    from pcapq.two_points import BetweenPoints

# The checks two aligned capture points add (not the core's: `CheckName`).
PointCheck = Literal["vanished_between_points", "reached_server_point", "synack_reached_client_point", "nothing_lost_between_points"]


class Evidence(TypedDict):
    """A frame to open, and what it shows."""

    file: int
    frame: int
    what: str


class CheckTally(TypedDict):
    """A check the core tested on a finding's connections (detect::checks): in how many it held
    and failed, what each says, and the kernel function or RFC section behind it."""

    # The core's checks, or those two aligned capture points add (pcapq.causes.between_points).
    check: CheckName | PointCheck
    held: int
    failed: int
    says_held: str
    says_failed: str
    cites: str


class Weighed(CheckTally):
    """A check a rule weighed (`pcapq.causes.context.EpisodeContext.checks`): a `CheckTally`,
    and whether a competing explanation of its sign holds when it fails."""

    competes: bool


@dataclass
class Finding:
    """One cause found at one server, with its evidence and counts."""

    cause: str
    server: str
    confidence: float
    confidence_reason: str
    first: float
    last: float
    connections: list[int]
    evidence: list[Evidence]
    advice: str
    proxy_log: list[str] = field(default_factory=list)
    # What the cause's words and the reports add, by key: JSON values (docs/json.md).
    details: dict[str, Any] = field(default_factory=dict)
    # How many connections it covers, when that is more than the ids listed (a flood's).
    count: int | None = None
    rests_on: list[str] = field(default_factory=list)
    disproved_by: list[str] = field(default_factory=list)
    # What evidence beyond the capture says (pcapq.evidence): "nstat: TcpExtListenOverflows +312".
    confirmed_by: list[str] = field(default_factory=list)
    contradicted_by: list[str] = field(default_factory=list)
    # Lines of the proxy's logs tied to this finding's connections, by kind (pcapq.evidence).
    logged: dict[str, int] = field(default_factory=dict)
    checked: bool = field(default=False, repr=False)
    # Marks of the connections this finding explains beyond its episode (a scan's probes on
    # every port it probed): [(server endpoint or address or None for all, all_of, none_of)].
    explains: list[tuple[str | None, tuple[Mark, ...], tuple[Mark, ...]]] = field(default_factory=list, repr=False)
    # Why it is not material (below its cause's `Materiality`): a line of "Minor observations"
    # instead of a panel; None when it is material.
    minor: str | None = None
    # The checks the core tested on its connections (detect::checks): each with how many held and
    # failed, what that says, and the kernel function or RFC section behind it.
    checks: list[CheckTally] = field(default_factory=list)
    # With two aligned capture points: where its connections' packets went between them
    # (pcapq.two_points.between_points).
    between_points: BetweenPoints | None = None

    @property
    def connection_count(self) -> int:
        return len(self.connections) if self.count is None else self.count

    def to_json(self) -> dict[str, object]:
        return {
            "cause": self.cause,
            "server": self.server,
            "confidence": round(self.confidence, 2),
            "confidence_reason": self.confidence_reason,
            "first": self.first,
            "last": self.last,
            "connections": {"count": self.connection_count, "ids": self.connections},
            "evidence": self.evidence,
            "rests_on": self.rests_on,
            "disproved_by": self.disproved_by,
            "advice": self.advice,
            "proxy_log": self.proxy_log,
            "details": self.details,
            # Only when evidence beyond the capture was given (--log, --nstat, --ss).
            **({"confirmed_by": self.confirmed_by, "contradicted_by": self.contradicted_by, "logged": self.logged}
               if self.checked else {}),
            **({"checks": self.checks} if self.checks else {}),
            **({"between_points": self.between_points} if self.between_points is not None else {}),
            **({"minor": self.minor} if self.minor is not None else {}),
        }

"""What a cause of failure is: its words, its advice, where it applies, and its rule.

One module per cause holds one `Cause`; `pcapq.causes.registry` lists the modules. Everything
that names causes (the CLI's choices, report titles, explain and lab wording, the table in
docs/diagnosis.md) reads them from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence, Union

if TYPE_CHECKING:
    # For the type checker only: at run time `Callable[["CaptureContext"], ...]` compiles its
    # forward references, 0.8 ms of every start-up.
    from typing import Callable, Literal, Optional

    from pcapq.causes.context import CaptureContext, EpisodeContext
    from pcapq.diagnose.finding import Finding

    Scope = Literal["capture", "episode", "server", "evidence"]

    CaptureRule = Callable[[CaptureContext], Sequence[Finding]]
    EpisodeRule = Callable[[EpisodeContext], Optional[Finding]]


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
    live_signs: Sequence[str] = ()
    """Signs (`_core.LiveSign`) that, seen on a capture watched live (`pcapq watch`), point to
    this cause alone: the live lines say "signs of" it, never that it is the cause."""

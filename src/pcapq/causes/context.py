"""What a rule reads: the capture's aggregates (`CaptureContext`) or one listener's episode
(`EpisodeContext`), and the helpers that turn a selection into a finding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol, Sequence

from pcapq._core import VOCABULARY, Analysis, Episode, Problems, Selection
from pcapq.causes.between_points import weigh
from pcapq.causes.proxy_log import LINES
from pcapq.finding import CheckTally, Evidence, Finding, Weighed
from pcapq.finding.capture_point import CapturePoint
from pcapq.finding.timeouts import ProxyTimeout, TimeoutKind, proxy_log_line
from pcapq.two_points import TwoPointFacts

if TYPE_CHECKING:
    from pcapq._core import Mark, SeriesKind, SignName, _LeanConnection, _OneSyn, _ServerStats
    from pcapq.finding import PointCheck

MAX_EVIDENCE = 6
# Facts that say the capture missed what a claim that nothing followed needs (the checks of the
# "nothing_followed" sign, detect::checks): the server's direction (one_way), or the rest of a
# flow the capture cut (flow_trimmed). A rule that claims nothing more was sent leaves these
# connections out; one that claims a SYN went unanswered before its re-send needs only the
# server's direction.
UNSEEN: tuple[Mark, ...] = ("one_way", "flow_trimmed")


class CauseWords(Protocol):
    """What a finding takes from its cause (a `pcapq.causes.cause.Cause`)."""

    @property
    def slug(self) -> str: ...
    @property
    def advice(self) -> str: ...
    @property
    def proxy_log(self) -> Sequence[str]: ...
    @property
    def disproved_by(self) -> Sequence[str]: ...


@dataclass
class CaptureContext:
    """What every cause's rule reads of one capture."""

    analysis: Analysis
    problems: Problems
    servers: list[_ServerStats]
    capture_point: CapturePoint
    _one_syn: Optional[_OneSyn] = field(default=None, repr=False)
    # The proxy's timeouts, stated or inferred (pcapq.finding.timeouts); a kind is absent when
    # neither says it.
    proxy_timeouts: dict[TimeoutKind, ProxyTimeout] = field(default_factory=dict)
    # What aligning this capture point with another says of its connections
    # (pcapq.two_points); None with one point.
    two_points: TwoPointFacts | None = None

    @property
    def one_syn(self) -> _OneSyn:
        if self._one_syn is None:
            self._one_syn = self.analysis.one_syn()
        return self._one_syn

    def server(self, endpoint: str) -> _ServerStats | None:
        return next((s for s in self.servers if s["server"] == endpoint), None)


@dataclass
class EpisodeContext:
    """One episode of a capture, as a rule weighs it."""

    capture: CaptureContext
    episode: Episode

    @property
    def server(self) -> str:
        return self.episode.server

    @property
    def capture_point(self) -> CapturePoint:
        return self.capture.capture_point

    def between_points(self, selection: Selection, check: PointCheck) -> tuple[Selection, list[Weighed]]:
        """`selection` less the connections two aligned capture points show `check` failed
        for, and its `checks` entry (pcapq.causes.between_points)."""
        return weigh(self.capture.two_points, self.episode, selection, check)

    def vanished_among(self, selection: Selection) -> Selection:
        """The selection's connections that lost a packet between two aligned capture points
        (none without two points)."""
        facts = self.capture.two_points
        return self.episode.among(selection, set(facts.lost) if facts is not None else set())

    def select(self, all_of: Sequence[Mark] = (), any_of: Sequence[Mark] = (), none_of: Sequence[Mark] = (),
               claimed: bool = False) -> Selection:
        return self.episode.select(list(all_of), list(any_of), list(none_of), claimed)

    def count(self, all_of: Sequence[Mark] = (), any_of: Sequence[Mark] = (), none_of: Sequence[Mark] = (),
              claimed: bool = False) -> int:
        return self.episode.count(list(all_of), list(any_of), list(none_of), claimed)

    def union(self, a: Selection, b: Selection) -> Selection:
        return self.episode.union(a, b)

    def claim(self, selection: Selection) -> None:
        self.episode.claim(selection)

    def checks(self, selection: Selection, sign: SignName) -> list[Weighed]:
        """The checks of `sign`'s explanations the core could test on the selection's connections
        (detect::checks), each with how many held and failed, what that says, and what it rests on."""
        texts, tested = VOCABULARY["check_texts"], selection.checks
        return [
            Weighed(check=name, held=held, failed=failed, competes=texts[name]["competes"],
                    says_held=texts[name]["held"], says_failed=texts[name]["failed"], cites=texts[name]["cites"])
            for name in VOCABULARY["checks"] if name in tested and sign in texts[name]["signs"]
            for held, failed in [tested[name]]
        ]

    def examples(self, selection: Selection, limit: int = MAX_EVIDENCE) -> list[_LeanConnection]:
        """Up to `limit` of the selection's connections (lean dicts), earliest first."""
        return self.capture.problems.examples(selection, limit)

    def finding(self, c: CauseWords, selection: Selection, confidence: float, reason: str, evidence: list[Evidence],
                rests_on: Sequence[str] = (), details: dict[str, Any] | None = None,
                proxy_log: Sequence[str] | None = None, checks: Sequence[Weighed] = ()) -> Finding:
        """A finding of cause `c` (the rule's own `CAUSE`) over the selection.

        Raises:
            ValueError: the selection is empty.
        """
        first, last = span(selection)
        keys = c.proxy_log if proxy_log is None else proxy_log
        return Finding(
            cause=c.slug,
            server=self.server,
            confidence=confidence,
            confidence_reason=reason,
            first=first,
            last=last,
            connections=selection.ids,
            count=len(selection) if len(selection) != len(selection.ids) else None,
            evidence=evidence[:MAX_EVIDENCE],
            advice=c.advice,
            proxy_log=[proxy_log_line(k, LINES[k], self.capture.proxy_timeouts) for k in keys],
            details=details or {},
            rests_on=list(rests_on),
            disproved_by=list(c.disproved_by),
            checks=[CheckTally(check=w["check"], held=w["held"], failed=w["failed"], says_held=w["says_held"],
                               says_failed=w["says_failed"], cites=w["cites"]) for w in checks],
        )


def span(selection: Selection) -> tuple[float, float]:
    """The first and last packet of the selection's connections (epoch seconds).

    Raises:
        ValueError: the selection is empty.
    """
    if selection.first is None or selection.last is None:
        raise ValueError("an empty selection has no first or last packet")
    return selection.first, selection.last


def checks_held(weighed: Sequence[Weighed]) -> list[str]:
    """A `rests_on` line naming the checks that held (`EpisodeContext.checks`), if any did."""
    held = [f"{c['check']} ({c['held']:,})" for c in weighed if c["held"]]
    return ["checks that held, in connections (docs/diagnosis.md): " + ", ".join(held)] if held else []


def checks_failed(weighed: Sequence[Weighed]) -> str:
    """What the failed checks took out of the finding, as a clause for its reason ("" if none)."""
    failed = [c for c in weighed if c["failed"]]
    if not failed:
        return ""
    return "; not counted: " + "; ".join(f"{plural(c['failed'], 'connection')}: {c['says_failed']}" for c in failed)


def frame(file: int, number: int, what: str) -> Evidence:
    return {"file": file, "frame": number, "what": what}


def series_frame(c: _LeanConnection, kind: SeriesKind, what: str) -> list[Evidence]:
    """The first re-send of the connection's `kind` series ("syn", "synack", "data")."""
    for s in c["series"]:
        if s.kind == kind and s.second:
            return [frame(s.second.file, s.second.frame, f"{what} (connection {c['id']})")]
    return []


def reset_frame(c: _LeanConnection, what: str) -> list[Evidence]:
    r = c["reset"]
    return [frame(r["file"], r["frame"], f"{what} (connection {c['id']})")] if r else []


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"

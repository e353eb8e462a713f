"""The diagnosis: every cause's rule over the capture's aggregates and each listener's episodes,
in the registry's precedence order (`pcapq.causes.registry`).

Python reads aggregates, episodes (marks counted and selected in the core) and at most a few
example connections per finding; it never loops over connections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional

from pcapq._core import Analysis
from pcapq.causes.context import CaptureContext, EpisodeContext
from pcapq.causes.registry import CAUSES, in_order, phrase
from pcapq.diagnose import settings
from pcapq.endpoint import parse
from pcapq.finding import Finding
from pcapq.finding.capture_point import CapturePoint, infer
from pcapq.finding.timeouts import ProxyTimeout, TimeoutKind, resolve

if TYPE_CHECKING:
    from pcapq._core import _InferredSettings
    from pcapq.evidence.section import EvidenceSection
    from pcapq.live import StdinRead
    from pcapq.two_points import TwoPointFacts

# More findings of one cause than this in one capture become one finding over many endpoints:
# a gnutella client dialling 900 peers is one story, not 122 panels.
MAX_PER_CAUSE = 8
MAX_EVIDENCE = 6


@dataclass
class Diagnosis:
    """What the diagnosis found in one capture."""

    capture_point: CapturePoint
    # The material findings: each gets a panel, and one of them makes `analyze` exit 1.
    findings: list[Finding]
    settings: list[str] = field(default_factory=list)
    # Findings below their cause's materiality (`Finding.minor` says why): one line each.
    minor_observations: list[Finding] = field(default_factory=list)
    # Standard input stopped by Ctrl-C: the sentence saying so and what had been read
    # (pcapq.live.StdinRead); None when the input was read to its end.
    interrupted: Optional[StdinRead] = None
    # The proxy's timeouts, stated or inferred (pcapq.finding.timeouts.ProxyTimeout by kind).
    proxy_timeouts: dict[TimeoutKind, ProxyTimeout] = field(default_factory=dict)
    # The capture held no TCP segment at all: nothing could fail, nor be found.
    no_tcp: bool = False
    # What the proxy's logs and the upstream's counters say (pcapq.diagnose.weigh_evidence), when given.
    evidence: EvidenceSection | None = None
    # The settings the capture shows, per listener that shows any (`Analysis.inferred_settings()`),
    # and those of the listener the findings are about, or of the only one.
    inferred_settings_by_listener: dict[str, _InferredSettings] = field(default_factory=dict)
    inferred_settings: _InferredSettings | None = None

    def every_finding(self) -> list[Finding]:
        """The material findings, then the minor ones."""
        return self.findings + self.minor_observations

    def nothing_found(self) -> str:
        """What the findings section says when there is no material finding."""
        if self.no_tcp:
            return "No TCP in this capture: there is no connection to analyse (the totals say what the packets were)."
        if self.minor_observations:
            n = len(self.minor_observations)
            return f"No failure that matters: {n} minor observation{'' if n == 1 else 's'} below."
        return "No failures found: no connection shows a listen-queue, loss or timeout problem."

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "capture_point": self.capture_point.to_json(),
            "settings": self.settings,
            "findings": [f.to_json() for f in self.findings],
            "minor_observations": [f.to_json() for f in self.minor_observations],
        }
        if self.evidence is not None:
            out["evidence"] = self.evidence
        if self.inferred_settings is not None:
            out["inferred_settings"] = self.inferred_settings
        if len(self.inferred_settings_by_listener) > 1:
            out["inferred_settings_by_listener"] = self.inferred_settings_by_listener
        if self.proxy_timeouts:
            out["proxy_timeouts"] = {kind: t.to_json() for kind, t in self.proxy_timeouts.items()}
        if self.interrupted is not None:
            out["interrupted"] = {**self.interrupted.to_json(), "text": self.interrupted.sentence()}
        return out


def diagnose(analysis: Analysis, proxy_timeouts: Optional[Mapping[str, float]] = None,
             said_by: Optional[Mapping[str, str]] = None, two_points: Optional[TwoPointFacts] = None) -> Diagnosis:
    """`proxy_timeouts`: the proxy's timeouts as the user stated them ({"connect": 2.0, "read":
    3.0}), and where each was said (`said_by`: "as stated" by default); the kinds not stated
    are inferred from the capture. `two_points`: what aligning this capture point with another
    says of its connections (pcapq.two_points), for the causes that read it."""
    servers = analysis.servers()
    problems = analysis.problems()
    timeouts = resolve(analysis, proxy_timeouts, said_by)
    ctx = CaptureContext(analysis, problems, servers, infer(servers), proxy_timeouts=timeouts, two_points=two_points)
    findings: list[Finding] = []
    for cause in in_order("capture"):
        findings.extend(cause.rule(ctx))
    explains = [e for f in findings for e in f.explains]
    by_endpoint = {s["server"]: s for s in servers}
    for server in problems.servers():
        stats = by_endpoint.get(server)
        for episode in problems.episodes(server):
            for where, all_of, none_of in explains:
                if where is None or where == server or where == parse(server).ip:
                    episode.claim(episode.select(list(all_of), [], list(none_of)))
            if stats is not None and episode.count() == 0:
                continue  # everything in it is explained already
            ectx = EpisodeContext(ctx, episode)
            for episode_cause in in_order("episode"):
                finding = episode_cause.rule(ectx)
                if finding is not None:
                    findings.append(finding)
    for cause in in_order("server"):
        findings.extend(cause.rule(ctx))
    findings = fold_many(findings)
    findings.sort(key=lambda f: (f.first, f.server, f.cause))
    material, minor = judge_materiality(findings, ctx)
    if two_points is not None:
        from pcapq.two_points import between_points

        for f in findings:
            f.between_points = between_points(two_points, f.connections)
    shown = analysis.inferred_settings()
    return Diagnosis(ctx.capture_point, material, settings.sentences(problems.timings()), minor_observations=minor,
                     proxy_timeouts=timeouts, no_tcp=analysis.summary()["tcp_segments"] == 0,
                     inferred_settings_by_listener=shown,
                     inferred_settings=settings.settings_shown(shown, [f.server for f in material]))


def judge_materiality(findings: list[Finding], ctx: CaptureContext) -> tuple[list[Finding], list[Finding]]:
    """The findings that matter and the minor ones, each judged by its cause's `Materiality`
    (a folded finding as one); a minor one's `minor` says why. A share is of the capture's own
    traffic: its connections less those the capture-wide findings (a port scan's probes, a SYN
    flood's SYNs) count, among which no failure hides."""
    scans_and_floods = sum(f.connection_count for f in findings if CAUSES[f.cause].scope == "capture")
    connections = max(ctx.analysis.summary()["connections"] - scans_and_floods, 0)
    material: list[Finding] = []
    minor: list[Finding] = []
    for f in findings:
        f.minor = CAUSES[f.cause].materiality.judge(f, ctx, connections)
        (material if f.minor is None else minor).append(f)
    return material, minor


def fold_many(findings: list[Finding]) -> list[Finding]:
    """Findings of a cause that has more than `MAX_PER_CAUSE` of them, as one finding."""
    by_cause: dict[str, list[Finding]] = {}
    for f in findings:
        by_cause.setdefault(f.cause, []).append(f)
    out: list[Finding] = []
    for cause, group in by_cause.items():
        out.extend(group if len(group) <= MAX_PER_CAUSE else [_fold(cause, group)])
    return out


def _fold(cause: str, group: list[Finding]) -> Finding:
    busiest = sorted(group, key=lambda f: (-f.connection_count, f.first, f.server))
    per_server: dict[str, int] = {}
    for f in group:
        per_server[f.server] = per_server.get(f.server, 0) + f.connection_count
    servers = sorted(per_server, key=lambda s: (-per_server[s], s))
    named = ", ".join(f"{s} ({per_server[s]:,})" for s in servers[:5])
    reason = (
        f"{phrase(cause)} on {len(servers):,} endpoints, the busiest {named}"
        + (" ..." if len(servers) > 5 else "")
        + f"; on {busiest[0].server}: {busiest[0].confidence_reason}"
    )
    ids = sorted({i for f in group for i in f.connections})
    counted = sum(f.connection_count for f in group)
    rests_on = list(dict.fromkeys(r for f in busiest[:3] for r in f.rests_on))
    proxy_log = list(dict.fromkeys(line for f in group for line in f.proxy_log))
    return Finding(
        cause=cause,
        server=f"{len(servers):,} endpoints",
        confidence=min(f.confidence for f in group),
        confidence_reason=reason,
        first=min(f.first for f in group),
        last=max(f.last for f in group),
        connections=ids,
        evidence=[e for f in busiest for e in f.evidence[:1]][:MAX_EVIDENCE],
        advice=group[0].advice,
        proxy_log=proxy_log,
        details={"endpoints": [[s, per_server[s]] for s in servers[:20]], "findings_folded": len(group)},
        count=counted if counted != len(ids) else None,
        rests_on=rests_on,
        disproved_by=group[0].disproved_by,
    )

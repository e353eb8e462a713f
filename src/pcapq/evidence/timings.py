"""The proxy's own timings of an upstream attempt against what the capture shows of its
connection: a second witness of each tie.

nginx's `$upstream_connect_time` and HAProxy's `%Tc` are the connect() of the attempt: from
its SYN to the handshake's end, as the capture shows from the first SYN to the handshake's ACK.
nginx's `$upstream_header_time` and HAProxy's `%Tc + %Tr` run from the attempt's start to the
response's first byte, as the capture shows from the first SYN to the server's first byte. The
core says whether each pair agrees (`evidence::join::times_agree`: within 10 ms and a tenth; a
re-sent SYN makes a connect() of 1 s, 3 s, ...: the log and the capture then agree in seconds),
and the join prefers the connection whose times agree; this module counts them and words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Literal

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote
    from pcapq.evidence.section import TimingsSection

# What each of the proxy's timings is set against (the keys of a note's "capture").
MEASURES: dict[str, Literal["connect", "first_byte"]] = {"connect": "connect", "header": "first_byte"}
EXAMPLES = 3


@dataclass
class Comparison:
    """One measure over the tied connections."""
    pairs: int = 0
    agree: int = 0
    longest_agreeing: float = 0.0
    """The longest logged time that agreed (a connect of 3 s is re-sent SYNs)."""
    differ: list[tuple[int, float, float]] = field(default_factory=list)
    """(connection id, logged, seen) of the first few that differ."""
    differing: int = 0

    def to_json(self) -> TimingsSection:
        return {"pairs": self.pairs, "agree": self.agree, "differ": self.differing,
                "examples": [{"connection": i, "logged": logged, "seen": round(seen, 6)} for i, logged, seen in self.differ]}


def compare(notes: Iterable[tuple[int, ProxyLogNote]]) -> dict[str, Comparison]:
    """Each measure the notes ((connection id, proxy_log note)) hold on both sides."""
    out = {measure: Comparison() for measure in MEASURES}
    for conn_id, note in notes:
        logged_all, seen_all, agree_all = note.get("timings", {}), note.get("capture"), note.get("timings_agree", {})
        for measure, seen_key in MEASURES.items():
            logged, seen = logged_all.get(measure), seen_all[seen_key] if seen_all is not None else None
            agrees = agree_all.get(measure)
            if logged is None or seen is None or agrees is None:
                continue
            c = out[measure]
            c.pairs += 1
            if agrees:
                c.agree += 1
                c.longest_agreeing = max(c.longest_agreeing, logged)
            else:
                c.differing += 1
                if len(c.differ) < EXAMPLES:
                    c.differ.append((conn_id, logged, seen))
    return {measure: c for measure, c in out.items() if c.pairs}


WORDS = {"connect": ("connect times", "handshakes"), "header": ("times to the response's first byte", "first bytes")}


def sentences(comparisons: dict[str, Comparison]) -> tuple[list[str], list[str]]:
    """(confirming, contradicting) sentences for a finding's `confirmed_by` and `contradicted_by`."""
    confirming, contradicting = [], []
    for measure, c in comparisons.items():
        what, seen = WORDS[measure]
        if c.agree:
            longest = f" (up to {c.longest_agreeing:.3f} s)" if c.longest_agreeing >= 0.5 else ""
            confirming.append(f"proxy log: its {what} agree with the {seen} the capture shows on {c.agree} "
                              f"connection{'s' if c.agree != 1 else ''}{longest}")
        if c.differing:
            examples = ", ".join(f"connection {i}: {logged:.3f} s logged, {seen_at:.3f} s seen" for i, logged, seen_at in c.differ)
            contradicting.append(f"proxy log: its {what} differ from the {seen} the capture shows on {c.differing} "
                                 f"connection{'s' if c.differing != 1 else ''} ({examples}): those lines may be about other connections")
    return confirming, contradicting

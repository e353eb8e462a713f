"""`pcapq annotate`: the capture written back as pcapng with pcapq's words on the packets it
labels, for Wireshark (docs/wireshark.md).

The core labels the packets (the words `pcapq timeline` shows) and writes the file as it reads
the input again (`Analysis.write_annotated`); this module chooses the connections, words the
section header's summary, names each connection's finding, and writes Wireshark colouring rules
that pick pcapq's labels out in the packet list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from pcapq import __version__

if TYPE_CHECKING:
    from pcapq.diagnose import Finding

# Every comment pcapq writes begins so: `frame.comment contains "pcapq: "` shows them all.
COMMENT_PREFIX = "pcapq: "


@dataclass(frozen=True)
class ColoringRule:
    """One of Wireshark's colouring rules (its `colorfilters` file: `@name@filter@[bg][fg]`,
    background first, each colour three 16-bit components)."""
    name: str
    filter: str
    foreground: tuple[int, int, int]
    background: tuple[int, int, int]

    def line(self) -> str:
        bg, fg = (",".join(str(c) for c in colour) for colour in (self.background, self.foreground))
        return f"@{self.name}@{self.filter}@[{bg}][{fg}]"


BLACK = (0, 0, 0)
# The labels pcapq writes that an operator looks for first, most telling first: Wireshark
# colours a packet with the first rule that matches it. Each filter picks words of the label
# (src/output/labels.rs) that only that kind of packet carries.
COLORING_RULES: tuple[ColoringRule, ...] = (
    ColoringRule("pcapq: spurious SYN-ACK (the server dropped the client's ACK: accept queue full)",
                 'frame.comment contains "spurious: the client already ACKed"', BLACK, (65535, 40000, 40000)),
    ColoringRule("pcapq: request re-sent into a half-open connection",
                 'frame.comment contains "sent into a half-open connection"', BLACK, (65535, 52000, 36000)),
    ColoringRule("pcapq: RST after a timeout (the client gave up)",
                 'frame.comment contains "RST from the client" && frame.comment contains "gave up"', BLACK, (60000, 44000, 60000)),
    ColoringRule("pcapq: refused (RST answering the SYN)",
                 'frame.comment contains "connection refused"', BLACK, (62000, 50000, 50000)),
    ColoringRule("pcapq: SYN re-sent (no SYN-ACK came)",
                 f'frame.comment contains "{COMMENT_PREFIX}SYN #"', BLACK, (65535, 62000, 40000)),
    ColoringRule("pcapq: a problem connection's first packet",
                 f'frame.comment contains "{COMMENT_PREFIX}connection "', BLACK, (52000, 58000, 65535)),
    ColoringRule("pcapq: any packet pcapq labelled",
                 f'frame.comment contains "{COMMENT_PREFIX}"', BLACK, (60000, 65535, 60000)),
)


def coloring_rules() -> str:
    """The colouring rules as Wireshark's `colorfilters` file writes them."""
    head = f"# pcapq {__version__}: colouring rules for captures written by `pcapq annotate` (docs/wireshark.md)\n"
    return head + "".join(rule.line() + "\n" for rule in COLORING_RULES)


def section_comment(sources: Sequence[str], findings: Sequence[Finding], minor: Sequence[Finding], selection: str) -> str:
    """The section header's comment: pcapq's version, what was annotated, and the findings."""
    from pcapq.report.findings import finding_title

    lines = [f"pcapq {__version__} annotated {', '.join(sources)} ({selection})."]
    if findings:
        for f in findings:
            lines.append(f"Finding: {finding_title(f)}, {f.connection_count:,} connections, confidence "
                         f"{f.confidence:.2f}, {f.first:.6f} to {f.last:.6f} (epoch s).")
    else:
        lines.append("No failure that matters was found.")
    for f in minor:
        lines.append(f"Minor: {finding_title(f)}: {f.minor}")
    lines.append(f'Display filter for pcapq\'s words: frame.comment contains "{COMMENT_PREFIX}"')
    return "\n".join(lines)


def finding_names(findings: Sequence[Finding], causes: Optional[Sequence[str]] = None) -> list[tuple[str, list[int]]]:
    """(the finding's title, its connections' ids) of each finding, material ones first, for the
    first packet of each of its connections; only those of `causes` when given."""
    from pcapq.report.findings import finding_title

    return [(finding_title(f), list(f.connections)) for f in findings if causes is None or f.cause in causes]

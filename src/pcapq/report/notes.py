"""What pcapng files say about themselves (application, interfaces, comments), as rows of
(label, text) that every report shows. The text comes from the capture: the core has removed
control characters and capped its length, and each renderer still escapes it as text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pcapq._core import _CaptureInfo


def _name(c: _CaptureInfo) -> str:
    return "standard input" if c["path"] == "-" else str(c["path"])


def note_rows(captures: Sequence[_CaptureInfo]) -> list[tuple[str, str]]:
    """(label, text) per string, capture by capture; labels name the file when there are several."""
    rows: list[tuple[str, str]] = []
    several = len(captures) > 1
    for c in captures:
        n = c.get("pcapng")
        if not n:
            continue
        prefix = f"{_name(c)}: " if several else ""
        made_by = ", ".join(f"{label} {said}" for said, label in ((n["application"], "by"), (n["os"], "on"), (n["hardware"], "hardware")) if said)
        if made_by:
            rows.append((f"{prefix}written", made_by))
        for i in n["interfaces"]:
            if i["name"] or i["description"]:
                rows.append((f"{prefix}interface", " - ".join(x for x in (i["name"], i["description"]) if x) + f" ({i['link_type']})"))
        for comment in n["comments"]:
            rows.append((f"{prefix}comment", comment))
        for p in n["packet_comments"]:
            rows.append((f"{prefix}frame {p['frame']:,}", p["comment"]))
        more = n["packet_comments_total"] - len(n["packet_comments"])
        if more > 0:
            rows.append((f"{prefix}frames", f"{more:,} more packet comments (pcapq analyze --format json lists the first 16)"))
    return rows

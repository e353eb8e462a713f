"""`pcapq explain` as text (wrapped for a terminal), markdown, JSON, a self-contained HTML page
with the connection's ladder diagram, or that ladder alone as SVG (the HTML report's ladder:
pcapq.report.html.ladder_svg)."""

from __future__ import annotations

import json
import textwrap

from pcapq.report.escape import md_text
from pcapq.teach.narrate import LOGGED, Story, Step

WIDTH = 100


def _frames(step: Step) -> str:
    frames = step.frames
    if not frames:
        # A packet only the other capture point saw (pcapq.teach.between).
        return "not in this capture"
    label = "frame" if len(frames) == 1 else "frames"
    shown = ", ".join(map(str, frames[:8])) + (f" ... ({len(frames)} in all)" if len(frames) > 8 else "")
    where = f" (file {step.file})" if step.file else ""
    return f"{label} {shown}{where}"


def _others(story: Story) -> str:
    named = ", ".join(map(str, story.others))
    more = story.matched - 1 - len(story.others)
    return f"connections {named}" + (f" and {more:,} more ({story.matched:,} in all)" if more > 0 else "")


def _details(step: Step) -> list[tuple[str, str]]:
    rows = [("why", step.why)]
    for label, value in (("queue", step.queue), ("kernel", step.kernel), ("application", step.application)):
        if value:
            rows.append((label, value))
    return [(k, v) for k, v in rows if v]


def text(story: Story) -> str:
    out: list[str] = []

    def para(s: str, indent: str = "", first: str | None = None) -> None:
        out.extend(textwrap.wrap(s, WIDTH, initial_indent=first if first is not None else indent,
                                 subsequent_indent=indent, break_on_hyphens=False))

    for line in story.intro:
        para(line)
    para(f"Chosen: {story.reason}." + (f" Also matching: {_others(story)} (--conn tells the first)."
                                       if story.others else ""))
    out.append("")
    for n, step in enumerate(story.steps, 1):
        head = f"{n}. +{step.offset:.4f} s, {_frames(step)}: the {step.actor} {step.what}"
        para(head, indent="   ")
        for label, value in _details(step):
            para(value, indent=" " * 17, first=f"   {label + ':':<14}")
        for term, meaning in step.terms.items():
            para(f"{term}: {meaning}", indent=" " * 8, first="   (def) ")
        out.append("")
    for line in story.ending:
        para(line)
    return "\n".join(out) + "\n"


def markdown(story: Story) -> str:
    c = story.connection
    out = [f"# Connection {c['id']}: {c['client']} to {c['server']}", ""]
    out += [*story.intro, "", f"*Chosen: {story.reason}.*", ""]
    if story.others:
        out += [f"Also matching: {_others(story)}.", ""]
    out += ["## Step by step", ""]
    for n, step in enumerate(story.steps, 1):
        out.append(f"{n}. **+{step.offset:.4f} s, {_frames(step)}**: the {step.actor} {step.what}")
        for label, value in _details(step):
            out.append(f"   - *{label}*: {value}")
        for term, meaning in step.terms.items():
            out.append(f"   - **{term}**: {meaning}")
    out += ["", "## What it meant", ""]
    # The sentence quoting the proxy's log is escaped: the log's text is no Markdown.
    out += [f"- {md_text(line) if line.startswith(LOGGED) else line}" for line in story.ending]
    return "\n".join(out) + "\n"


def as_json(story: Story, pretty: bool = True) -> str:
    return json.dumps(story.to_json(), indent=2 if pretty else None) + "\n"


def _ladder(story: Story) -> str:
    from pcapq.report.html import ladder_svg
    from pcapq.report.timeline import annotate

    return ladder_svg(annotate(story.connection, story.labels))


def svg(story: Story) -> str:
    """The connection's ladder diagram: one arrow per packet pcapq labelled, with the kernel's
    expected retransmission times as dashed lines."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _ladder(story) + "\n"


def html(story: Story) -> str:
    from pcapq.report.escape import html_text as h
    from pcapq.report.html import page

    c = story.connection
    body = [f"<h1>Connection {c['id']}: {h(c['client'])} to {h(c['server'])}</h1>"]
    body += [f"<p>{h(line)}</p>" for line in story.intro]
    chosen = f"Chosen: {story.reason}." + (f" Also matching: {_others(story)}." if story.others else "")
    body.append(f'<p class="muted">{h(chosen)}</p>')
    body.append(f'<div class="ladder">{_ladder(story)}</div>')
    body.append("<h2>Step by step</h2><ol>")
    for step in story.steps:
        head = f"+{step.offset:.4f} s, {_frames(step)}: the {step.actor} {step.what}"
        details = "".join(f"<dt>{h(label)}</dt><dd>{h(value)}</dd>" for label, value in _details(step))
        terms = "".join(f"<dt><dfn>{h(term)}</dfn></dt><dd>{h(meaning)}</dd>" for term, meaning in step.terms.items())
        body.append(f"<li><p><strong>{h(head)}</strong></p><dl>{details}{terms}</dl></li>")
    body.append("</ol><h2>What it meant</h2><ul>")
    body += [f"<li>{h(line)}</li>" for line in story.ending]
    body.append("</ul>")
    return page(f"pcapq explain: connection {c['id']}", "\n".join(body))


RENDERERS = {"text": text, "markdown": markdown, "json": as_json, "html": html, "svg": svg}

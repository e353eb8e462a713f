"""The section "Between the two points": what aligning two capture points found (the JSON
`paths` entry, pcapq.two_points): the clocks, the one-way delays, the packets lost each way,
and the connections that lost them, packet by packet, with the frame at the point that saw
each one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from pcapq.report.escape import md_text

if TYPE_CHECKING:
    from pcapq._core import _Direction, _Path, _PathConnection, _Vanished

# Rows of the per-second and per-connection tables; the JSON has them all.
MAX_SECONDS = 20
MAX_CONNECTIONS = 10
MAX_PACKETS = 6

WAYS: dict[_Direction, str] = {"client_to_server": "client → server", "server_to_client": "server → client"}
KINDS = {"S": "SYN", "S.": "SYN-ACK", ".": "ACK", "R": "RST", "R.": "RST"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _utc(epoch: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%H:%M:%S")


def packet_words(v: _Vanished) -> str:
    """One vanished packet: "SYN (frame 12) seen at proxy.pcap, missing at server.pcap"."""
    kind = KINDS.get(v["flags"]) or (f"{v['len']} bytes at seq {v['seq']}" if v["len"] else f"[{v['flags']}] seq {v['seq']}")
    return f"{kind} (frame {v['frame']}) seen at {v['seen_at']}, missing at {v['missing_at']}"


def sentences(entry: _Path) -> list[str]:
    """The section's lines before its tables."""
    first, second = entry["points"]
    out = []
    client_side = entry["client_side"]
    if client_side is not None:
        server_side = second if client_side == first else first
        out.append(f"{client_side} is the point nearer the clients, {server_side} the one nearer the servers.")
    if entry["offset_uncertainty"] is not None:
        if abs(entry["clock_offset"]) < 0.5e-6:
            relation = f"{second}'s clock agrees with {first}'s"
        else:
            ahead = "ahead of" if entry["clock_offset"] > 0 else "behind"
            relation = f"{second}'s clock is {abs(entry['clock_offset']):.6f} s {ahead} {first}'s"
        out.append(
            f"{relation} "
            f"(± {_ms(entry['offset_uncertainty'])}, drift {entry['drift_ppm']:+.3f} ppm), "
            f"from {entry['matched_packets']:,} packets seen at both."
        )
    else:
        out.append(
            f"{entry['matched_packets']:,} packets seen at both, but none crossed back: the clock offset "
            f"({entry['clock_offset']:.6f} s) is rough, within the one-way delay."
        )
    delays = entry["delays"]
    if delays:
        for way, words in WAYS.items():
            d = delays[way]
            if d["packets"]:
                out.append(f"One-way delay {words}: min {_ms(d['min'])}, mean {_ms(d['mean'])}, spread {_ms(d['spread'])}, "
                           f"max {_ms(d['max'])} ({d['packets']:,} packets).")
    lost = entry["vanished_packets"]
    if lost["client_to_server"] or lost["server_to_client"]:
        out.append(
            f"Vanished between the points: {lost['client_to_server']:,} packets client → server, "
            f"{lost['server_to_client']:,} server → client, in {len(entry['connections']):,} connections."
        )
    else:
        out.append("No packet vanished between the points: every packet one point saw on its way to the other arrived.")
    elsewhere = sum(entry["one_point_only"].values())
    if elsewhere:
        out.append(f"{elsewhere:,} packets were seen at one point only where the other was not capturing or not on their path "
                   "(not counted as lost).")
    return out


def render_text(entry: _Path) -> RenderableType:
    """The section for a terminal."""
    first, second = entry["points"]
    parts: list[RenderableType] = [Rule(Text(f"Between the two points: {first} and {second}"), align="left")]
    parts += [Text(line) for line in sentences(entry)]
    if entry["loss_per_second"]:
        seconds = Table(title="Lost between the points, per second (UTC)", title_justify="left", show_edge=False, pad_edge=False)
        for column in ("second", "client → server", "server → client"):
            seconds.add_column(column, justify="right")
        for row in entry["loss_per_second"][:MAX_SECONDS]:
            seconds.add_row(_utc(row["second"]), f"{row['client_to_server']:,}", f"{row['server_to_client']:,}")
        parts += [Text(""), seconds]
    if entry["connections"]:
        conns = Table(title="Connections that lost packets between the points", title_justify="left", show_edge=False, pad_edge=False)
        for column in ("client", "server", "ids", "vanished"):
            conns.add_column(column, overflow="fold")
        for c in entry["connections"][:MAX_CONNECTIONS]:
            conns.add_row(*_connection_cells(entry, c))
        parts += [Text(""), conns]
        if len(entry["connections"]) > MAX_CONNECTIONS:
            parts.append(Text(f"... and {len(entry['connections']) - MAX_CONNECTIONS:,} more (--format json lists them all)", style="dim"))
    return Group(*parts)


def _connection_cells(entry: _Path, c: _PathConnection) -> tuple[str, str, str, str]:
    names = entry["points"]
    client = " / ".join(dict.fromkeys(v for v in (c["client"][n] for n in names) if v))
    server = " / ".join(dict.fromkeys(v for v in (c["server"][n] for n in names) if v))
    ids = ", ".join(f"{c['ids'][n]} at {n}" for n in names if c["ids"][n] is not None) or "-"
    lines = [f"{WAYS[v['direction']]}: {packet_words(v)}" for v in c["vanished"][:MAX_PACKETS]]
    if len(c["vanished"]) > MAX_PACKETS:
        lines.append(f"... {len(c['vanished']) - MAX_PACKETS} more")
    return client, server, ids, "\n".join(lines)


def render_markdown(entry: _Path) -> str:
    """The section for a Markdown page."""
    first, second = entry["points"]
    out = [f"# Between the two points: {md_text(first)} and {md_text(second)}", ""]
    out += [md_text(line) for line in sentences(entry)]
    out.append("")
    if entry["loss_per_second"]:
        out += ["| second (UTC) | client → server | server → client |", "|---|---:|---:|"]
        out += [f"| {_utc(r['second'])} | {r['client_to_server']:,} | {r['server_to_client']:,} |" for r in entry["loss_per_second"][:MAX_SECONDS]]
        out.append("")
    if entry["connections"]:
        out += ["| client | server | ids | vanished |", "|---|---|---|---|"]
        for c in entry["connections"][:MAX_CONNECTIONS]:
            cells = ["<br>".join(md_text(line) for line in x.split("\n")) for x in _connection_cells(entry, c)]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def render_html(entry: _Path, escape: Callable[[str], str], other_findings: Sequence[str] = ()) -> list[str]:
    """The section for an HTML page, its parts; `escape` writes text as HTML; `other_findings`:
    one line per finding of the other point (its page is not drawn)."""
    first, second = entry["points"]
    out = [f'<h2 id="between">Between the two points: {escape(first)} and {escape(second)}</h2>']
    out += [f"<p>{escape(line)}</p>" for line in sentences(entry)]
    if entry["loss_per_second"]:
        rows = "".join(f"<tr><td>{escape(_utc(r['second']))}</td><td class=num>{r['client_to_server']:,}</td>"
                       f"<td class=num>{r['server_to_client']:,}</td></tr>" for r in entry["loss_per_second"][:MAX_SECONDS])
        out.append('<table class="conns"><thead><tr><th>second (UTC)</th><th>client → server</th><th>server → client</th>'
                   f"</tr></thead><tbody>{rows}</tbody></table>")
    if entry["connections"]:
        rows = "".join("<tr>" + "".join(f"<td class=wrap>{'<br>'.join(escape(x) for x in cell.split(chr(10)))}</td>"
                                        for cell in _connection_cells(entry, c)) + "</tr>"
                       for c in entry["connections"][:MAX_CONNECTIONS])
        out.append('<table class="conns"><thead><tr><th>client</th><th>server</th><th>ids</th><th>vanished</th></tr></thead>'
                   f"<tbody>{rows}</tbody></table>")
        if len(entry["connections"]) > MAX_CONNECTIONS:
            out.append(f'<p class="muted">... and {len(entry["connections"]) - MAX_CONNECTIONS:,} more (--format json lists them all)</p>')
    if other_findings:
        out.append("<p>At the other point: " + "; ".join(escape(line) for line in other_findings) + ".</p>")
    return out

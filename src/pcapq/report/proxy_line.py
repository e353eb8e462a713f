"""The proxy's log line tied to a connection (its `proxy_log` note, docs/evidence.md), in words the
timeline renderers and `pcapq explain` share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote


def where(note: ProxyLogNote) -> str:
    """"error.log:12": the file as given to --log, and the line's number."""
    return f"{note['file']}:{note['line']}"


def verdict(note: ProxyLogNote) -> str:
    """"504 connect_timeout": the status the proxy answered (when known) and the line's kind,
    with how the line was tied when it was by the proxy's source port."""
    said = f"{note['status']} {note['kind']}" if note.get("status") is not None else note["kind"]
    return said + (", tied by the proxy's source port" if note.get("exact") else "")


def timing_sentence(note: ProxyLogNote) -> Optional[str]:
    """The proxy's own times set against the capture's, when the line has them: "The proxy
    measured 3.001 s to connect; the capture shows the handshake done 3.002 s after the first
    SYN." None without a pair to compare."""
    timings = note.get("timings", {})
    capture = note.get("capture", {"connect": None, "first_byte": None})
    measured: list[str] = []
    shown: list[str] = []
    # $upstream_connect_time against the handshake's ACK; $upstream_header_time against the
    # server's first byte: both counted from the attempt's start, the capture's first SYN.
    if timings.get("connect") is not None and capture.get("connect") is not None:
        measured.append(f"{timings['connect']:.3f} s to connect")
        shown.append(f"the handshake done {capture['connect']:.3f} s")
    if timings.get("header") is not None and capture.get("first_byte") is not None:
        measured.append(f"{timings['header']:.3f} s to the response header")
        shown.append(f"the server's first byte {capture['first_byte']:.3f} s")
    if not measured:
        return None
    return f"The proxy measured {' and '.join(measured)}; the capture shows {' and '.join(shown)} after the first SYN."

"""The proxy's connect and read timeouts: stated by the user (`--proxy-timeouts
connect=2,read=3`), inferred by the core from when connections gave up
(`Analysis.proxy_timeouts`, src/detect/timeouts.rs), or, failing both, nginx's default, which
is a guess and said to be one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Optional, Union

from pcapq._core import Analysis

TimeoutKind = Literal["connect", "read"]
KINDS: tuple[TimeoutKind, ...] = ("connect", "read")
# nginx proxy_connect_timeout / proxy_read_timeout (and fastcgi_*) default, seconds.
NGINX_DEFAULT_S = 60.0


@dataclass(frozen=True)
class ProxyTimeout:
    """One of the proxy's timeouts: stated, measured or bounded."""

    kind: TimeoutKind
    seconds: float
    # "stated" (--proxy-timeouts), "measured" (read give-ups clustered at it), "bounded" (connect
    # give-ups fall between SYNs around it: rounded to a whole second), "default" (a guess).
    source: str
    connections: int = 0
    # Where a stated timeout was said: "as stated" (--proxy-timeouts), or the configuration's
    # directive ("nginx.conf: fastcgi_read_timeout 3s").
    said_by: str = "as stated"
    # "ranged": (above, at most) seconds, where every give-up's FIN was held back behind its
    # unacknowledged request; `seconds` is the lower end.
    range: Optional[tuple[float, float]] = None

    @property
    def sure(self) -> bool:
        return self.source in ("stated", "measured")

    def phrase(self) -> str:
        """"the proxy's 3 s read timeout (181 connections gave up after it)"; "probably" where
        the number is a guess."""
        if self.source == "stated":
            return f"the proxy's {self.seconds:g} s {self.kind} timeout ({self.said_by})"
        if self.source == "measured":
            return f"the proxy's {self.seconds:g} s {self.kind} timeout ({self.connections:,} connections gave up after it)"
        if self.source == "bounded":
            return (f"the proxy's {self.kind} timeout, probably {self.seconds:g} s ({self.connections:,} connections "
                    "stopped re-sending their SYN around then)")
        if self.source == "ranged" and self.range:
            above, most = self.range
            return (f"the proxy's {self.kind} timeout, probably {self.seconds:g} s (above {above:.3g} s, at most {most:.3g} s: "
                    f"{self.connections:,} connections' FINs waited behind their unacknowledged requests)")
        return (f"the proxy's {self.kind} timeout, probably nginx's default {self.seconds:g} s (no connection in the "
                "capture gave up after one; state it with --proxy-timeouts)")

    def to_json(self) -> dict[str, Union[float, str, list[float]]]:
        out: dict[str, Union[float, str, list[float]]] = {"seconds": self.seconds, "connections": self.connections}
        if self.source != "measured":
            out["source"] = self.source
        if self.range:
            out["range"] = [round(x, 3) for x in self.range]
        return out


class BadTimeouts(ValueError):
    pass


def parse(text: str) -> dict[str, float]:
    """'connect=2,read=3' -> {'connect': 2.0, 'read': 3.0}; 'read=2.5s' works too."""
    stated: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, value = part.partition("=")
        kind = kind.strip()
        if not sep or kind not in KINDS:
            raise BadTimeouts(f"{part!r}: expected connect=SECONDS or read=SECONDS")
        try:
            seconds = float(value.strip().removesuffix("s"))
        except ValueError:
            raise BadTimeouts(f"{part!r}: {value!r} is not a number of seconds") from None
        if not 0 < seconds <= 86400:
            raise BadTimeouts(f"{part!r}: seconds must be above 0 and at most 86400")
        stated[kind] = seconds
    if not stated:
        raise BadTimeouts("expected connect=SECONDS, read=SECONDS or both")
    return stated


def resolve(analysis: Analysis, stated: Optional[Mapping[str, float]] = None,
            said_by: Optional[Mapping[str, str]] = None) -> dict[TimeoutKind, ProxyTimeout]:
    """Each kind's timeout: stated (where: `said_by`, "as stated" by default), else inferred
    from the capture; absent when neither."""
    inferred = analysis.proxy_timeouts()
    out: dict[TimeoutKind, ProxyTimeout] = {}
    for kind in KINDS:
        if stated and kind in stated:
            seen = inferred.get(kind)
            out[kind] = ProxyTimeout(kind, stated[kind], "stated", seen["connections"] if seen and seen["seconds"] == stated[kind] else 0,
                                     (said_by or {}).get(kind, "as stated"))
        elif kind in inferred:
            t = inferred[kind]
            source = "ranged" if t.get("range") else "measured" if t["measured"] else "bounded"
            out[kind] = ProxyTimeout(kind, t["seconds"], source, t["connections"], range=t.get("range"))
    return out


def or_default(timeouts: Mapping[TimeoutKind, ProxyTimeout], kind: TimeoutKind) -> ProxyTimeout:
    return timeouts.get(kind) or ProxyTimeout(kind, NGINX_DEFAULT_S, "default")


# Which timeout a predicted proxy-log line rests on (pcapq.causes.proxy_log.LINES).
LINE_TIMEOUT: dict[str, TimeoutKind] = {"timed_out": "connect", "read_timeout": "read"}


def proxy_log_line(key: str, line: str, timeouts: Mapping[TimeoutKind, ProxyTimeout]) -> str:
    """A predicted nginx error.log line, with the timeout it rests on; "probably" when that
    timeout is a guess."""
    kind = LINE_TIMEOUT.get(key)
    if kind is None:
        return line
    t = or_default(timeouts, kind)
    if t.sure:
        return f"{line} (after {t.phrase()})"
    if t.source in ("bounded", "ranged"):
        return f"probably {line} (after {t.phrase()})"
    waited = "a connect()" if kind == "connect" else "a request"
    return f"probably {line}, if {waited} waited past the proxy's {kind} timeout (nginx's default: {t.seconds:g} s)"

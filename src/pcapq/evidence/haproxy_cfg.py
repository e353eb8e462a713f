"""What haproxy.cfg says that the evidence needs (`--haproxy-cfg`): the log format its proxies
write, each backend server's address, and the connect and server timeouts.

HAProxy's syntax (the configuration manual, "2. Configuring HAProxy"): one directive per line,
`#` starts a comment, a backslash escapes the next character, double quotes group words;
sections begin with `global`, `defaults`, `frontend`, `listen` or `backend`. A `defaults`
section's settings hold for the proxies after it; a proxy's own override them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from pcapq.endpoint import parse
from pcapq.evidence.haproxy import HTTPLOG, TCPLOG

SECTIONS = ("global", "defaults", "frontend", "listen", "backend", "resolvers", "peers", "userlist", "program",
            "http-errors", "ring", "cache", "mailers")
# HAProxy's time units (5.1 "Time format"); a bare number is milliseconds.
UNITS = {"us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
TIME = re.compile(r"(\d+)(us|ms|s|m|h|d)?")
# `timeout connect` is the upstream's connect, `timeout server` its answer (nginx's read).
TIMEOUTS = {"connect": "connect", "server": "read"}


class HaproxyCfgError(ValueError):
    """A configuration pcapq cannot read: the message is one sentence."""


@dataclass
class HaproxyCfg:
    path: str
    formats: list[str] = field(default_factory=list)
    """The log formats the proxies write (`log-format`, or what `option httplog` / `tcplog`
    stand for), each once, in the order first met."""
    frontends: dict[str, str] = field(default_factory=dict)
    """Frontend (or listen) name -> the log format it writes, where it sets one."""
    servers: dict[tuple[str, str], str] = field(default_factory=dict)
    """(backend, server name) -> its address `IP:PORT`, for servers given by address."""
    timeouts: dict[str, tuple[float, str]] = field(default_factory=dict)
    """"connect" / "read" -> (seconds, the directive as written), where every proxy that
    connects to servers says the same; a kind set to different values is left out."""

    def custom_formats(self) -> list[str]:
        """The `log-format`s the proxies write other than httplog's and tcplog's (those are read
        without being told)."""
        return [f for f in self.formats if f not in (HTTPLOG, TCPLOG)]


def _words(line: str) -> list[str]:
    """A line's words: quotes group, a backslash escapes, `#` outside quotes ends it."""
    words: list[str] = []
    word, quoted, escaped, started = "", False, False, False
    for ch in line:
        if escaped:
            word, escaped, started = word + ch, False, True
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted, started = not quoted, True
        elif ch == "#" and not quoted:
            break
        elif ch.isspace() and not quoted:
            if started:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + ch, True
    if started:
        words.append(word)
    return words


def _seconds(value: str) -> Optional[float]:
    m = TIME.fullmatch(value)
    return int(m.group(1)) * UNITS[m.group(2) or "ms"] if m else None


def _address(value: str) -> Optional[str]:
    """`IP:PORT` of a server's address (`10.0.0.2:9000`, `ipv6@[fd00::2]:80`, `[fd00::2]:80`);
    None for a name, a unix socket or an address without a port."""
    try:
        return str(parse(value.split("@", 1)[1] if "@" in value else value))
    except ValueError:
        return None


def read_haproxy_cfg(path: str) -> HaproxyCfg:
    """Reads `path`.

    Raises:
        HaproxyCfgError: it cannot be read, or has no proxy section.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise HaproxyCfgError(f"{path}: cannot read the HAProxy configuration: {e.strerror or e}") from None
    cfg = HaproxyCfg(path)
    defaults: dict[str, str] = {}
    proxies: list[tuple[str, str, dict[str, str]]] = []  # (kind, name, its settings over the defaults)
    section, name = "", ""  # the section being read
    own: dict[str, str] = {}
    seen_sections = False

    def close() -> None:
        if section in ("frontend", "listen", "backend"):
            proxies.append((section, name, {**defaults, **own}))

    for line in lines:
        words = _words(line)
        if not words:
            continue
        if words[0] in SECTIONS:
            close()
            section, name, own = words[0], (words[1] if len(words) > 1 else ""), {}
            seen_sections = True
            if section == "defaults":
                defaults = {}
            continue
        target = defaults if section == "defaults" else own
        if words[:2] == ["option", "httplog"]:
            target["log-format"] = HTTPLOG
        elif words[:2] == ["option", "tcplog"]:
            target["log-format"] = TCPLOG
        elif words[0] == "log-format" and len(words) > 1:
            target["log-format"] = " ".join(words[1:])
        elif words[0] == "timeout" and len(words) == 3 and words[1] in TIMEOUTS:
            target[f"timeout {words[1]}"] = words[2]
        elif words[0] == "server" and len(words) > 2 and section in ("backend", "listen"):
            address = _address(words[2])
            if address:
                cfg.servers[(name, words[1])] = address
    close()
    if not seen_sections:
        raise HaproxyCfgError(f"{path}: no HAProxy section (global, defaults, frontend, backend, listen) in it")
    for kind, proxy, settings in proxies:
        fmt = settings.get("log-format")
        if fmt and kind in ("frontend", "listen"):
            cfg.frontends[proxy] = fmt
            if fmt not in cfg.formats:
                cfg.formats.append(fmt)
    connecting = [settings for kind, _, settings in proxies if kind in ("backend", "listen")]
    for directive, kind in TIMEOUTS.items():
        said: set[tuple[float, str]] = set()
        for settings in connecting:
            value = settings.get(f"timeout {directive}")
            seconds = _seconds(value) if value else None
            if seconds:
                said.add((seconds, f"timeout {directive} {value}"))
        if len({seconds for seconds, _ in said}) == 1:
            cfg.timeouts[kind] = min(said)
    return cfg

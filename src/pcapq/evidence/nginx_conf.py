"""What nginx's configuration says that the evidence needs (`--nginx-conf`): the access logs'
`log_format`s, which format each `access_log` writes, and the upstream timeouts.

nginx's syntax: directives end with `;`, blocks are `{ ... }`, `#` starts a comment outside
quotes, and a `log_format`'s string may be several quoted parts, joined. `include` is followed
(relative to the file's directory, globs allowed), as nginx does."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Optional

# Upstream timeouts by the kind pcapq knows (docs/evidence.md): proxy_pass, fastcgi_pass,
# uwsgi_pass, scgi_pass and grpc_pass each have their own pair.
TIMEOUTS = {
    f"{module}_{kind}_timeout": kind
    for module in ("proxy", "fastcgi", "uwsgi", "scgi", "grpc")
    for kind in ("connect", "read")
}
# nginx's time units (ngx_parse_time()); a bare number is seconds.
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "M": 2592000.0, "y": 31536000.0}
TIME = re.compile(r"(\d+)(ms|s|m|h|d|w|M|y)?")
MAX_INCLUDES = 256
TOKEN = re.compile(r"""\s*(?:#[^\n]*|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([;{}])|([^\s;{}"'#]+))""")


class NginxConfError(ValueError):
    """A configuration pcapq cannot read: the message is one sentence."""


@dataclass
class NginxConf:
    path: str
    formats: dict[str, str] = field(default_factory=dict)
    """`log_format` name -> its string, the parts joined."""
    json_formats: set[str] = field(default_factory=set)
    """The formats with `escape=json` (read as JSON lines without being told)."""
    access_logs: list[tuple[str, str]] = field(default_factory=list)
    """(path, format name) of each `access_log`; nginx's default format is `combined`."""
    timeouts: dict[str, tuple[float, str]] = field(default_factory=dict)
    """"connect" / "read" -> (seconds, the directive as written), where every one of its kind
    in the file says the same; a kind set to different values in different places is left out."""

    def format_for(self, log_path: str) -> Optional[str]:
        """The `log_format` string of the access log written to `log_path` (matched by its file
        name), or of the only custom format the access logs use; None for `combined`, JSON or
        when it cannot be told."""
        name = os.path.basename(log_path)
        used = {fmt for path, fmt in self.access_logs if fmt in self.formats}
        by_name = [fmt for path, fmt in self.access_logs if os.path.basename(path) == name]
        chosen = by_name[0] if by_name else (next(iter(used)) if len(used) == 1 else None)
        if chosen is None or chosen in self.json_formats:
            return None
        return self.formats.get(chosen)


def _statements(path: str, depth: int = 0) -> list[list[str]]:
    """The directives of `path` and of the files it includes, each as its words (quotes
    removed), blocks flattened."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise NginxConfError(f"{path}: cannot read the nginx configuration: {e.strerror or e}") from None
    out: list[list[str]] = []
    words: list[str] = []
    for m in TOKEN.finditer(text):
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        if quoted is not None:
            words.append(quoted)
        elif m.group(3):
            if words and m.group(3) == ";":
                if words[0] == "include" and len(words) == 2:
                    if depth >= MAX_INCLUDES:
                        raise NginxConfError(f"{path}: includes nested deeper than {MAX_INCLUDES}")
                    pattern = os.path.join(os.path.dirname(path), words[1])
                    for included in sorted(glob.glob(pattern)):
                        out.extend(_statements(included, depth + 1))
                else:
                    out.append(words)
            words = []
        elif m.group(4):
            words.append(m.group(4))
    return out


def _seconds(value: str) -> Optional[float]:
    """nginx's time ("90s", "1m30s", "500ms", "3") in seconds."""
    total, at = 0.0, 0
    for m in TIME.finditer(value):
        if m.start() != at:
            return None
        total += int(m.group(1)) * UNITS[m.group(2) or "s"]
        at = m.end()
    return total if at == len(value) and at else None


def read_nginx_conf(path: str) -> NginxConf:
    """Reads `path` (and what it includes).

    Raises:
        NginxConfError: it cannot be read, or holds no directive.
    """
    statements = _statements(path)
    if not statements:
        raise NginxConfError(f"{path}: no nginx directive in it")
    conf = NginxConf(path)
    timeouts: dict[str, set[tuple[float, str]]] = {}
    for words in statements:
        name, args = words[0], words[1:]
        if name == "log_format" and len(args) >= 2:
            fmt_name, rest = args[0], args[1:]
            if rest[0].startswith("escape="):
                if rest[0] == "escape=json":
                    conf.json_formats.add(fmt_name)
                rest = rest[1:]
            conf.formats[fmt_name] = "".join(rest)
        elif name == "access_log" and args and args[0] != "off":
            conf.access_logs.append((args[0], args[1] if len(args) > 1 and "=" not in args[1] else "combined"))
        elif name in TIMEOUTS and len(args) == 1:
            seconds = _seconds(args[0])
            if seconds:
                timeouts.setdefault(TIMEOUTS[name], set()).add((seconds, f"{name} {args[0]}"))
    for kind, said in timeouts.items():
        if len({s for s, _ in said}) == 1:
            conf.timeouts[kind] = min(said)
    return conf

"""Escaping for text that comes from a capture (file names, pcapng comments, anything read
from packets) before it goes into HTML or Markdown. Every renderer passes such text through
here; nothing from a capture is ever trusted as markup."""

from __future__ import annotations

import html
import json
import re
from typing import Any

# Characters that end or change a <script> element's text or a JavaScript string:
# "</script>", "<!--", HTML entities, and the JS line terminators U+2028 and U+2029.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def html_text(value: object) -> str:
    """Text for an HTML element's content or a quoted attribute value."""
    return html.escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON to embed in <script type="application/json">: parses back to `value`, and no
    string in it can close the element, open a comment, or break a JavaScript string."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group(0)], text)


# Markdown (CommonMark/GFM) punctuation that can start formatting, links, code or HTML.
_MD_SPECIAL_RE = re.compile(r"([\\`*_\[\]|~])")


def md_text(value: object) -> str:
    """Text for Markdown: backslash-escapes formatting characters (pipes included, so it is
    safe in a table cell), turns < and & into entities so no HTML gets through, and keeps it
    on one line."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;")
    text = _MD_SPECIAL_RE.sub(r"\\\1", text)
    return " ".join(text.splitlines())


def md_code(value: object) -> str:
    """Inline code for Markdown, for text made by pcapq itself (flags, slugs): a backtick run
    longer than any inside it. Pipes are escaped for table cells."""
    text = " ".join(str(value).splitlines()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"

"""The settings a capture shows (`Analysis.inferred_settings()`), as rows for every format: the
setting, its value or range, how sure, and what it rests on."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pcapq._core import _InferredSetting, _InferredSettings

TITLE = "Settings this capture shows"
HEADER = ("setting", "value", "confidence", "rests on")

# Each setting's name in a report, in the order the core writes them.
LABELS: dict[str, str] = {
    "backlog": "effective backlog",
    "workers": "workers",
    "syncookies": "net.ipv4.tcp_syncookies",
    "synack_retries": "net.ipv4.tcp_synack_retries",
    "syn_retries": "client net.ipv4.tcp_syn_retries",
    "syn_linear_timeouts": "client net.ipv4.tcp_syn_linear_timeouts",
    "client_timeout_s": "client timeout",
}


def _number(n: float, seconds: bool) -> str:
    return f"{n:.1f} s" if seconds else f"{n:,.0f}"


def value_text(setting: _InferredSetting, seconds: bool = False) -> str:
    """"16", "2 (2 to 3)", "at least 3", "4 to 6", "on"."""
    value, low, high = setting["value"], setting["low"], setting["high"]
    if isinstance(value, bool):
        return "on" if value else "off"
    if low is not None and high is not None:
        bounds = _number(low, seconds) if low == high else f"{_number(low, seconds)} to {_number(high, seconds)}"
    elif low is not None:
        bounds = f"at least {_number(low, seconds)}"
    elif high is not None:
        bounds = f"at most {_number(high, seconds)}"
    else:
        bounds = ""
    if value is None:
        return bounds
    shown = _number(value, seconds)
    return shown if bounds in ("", shown) else f"{shown} ({bounds})"


def rows(settings: _InferredSettings) -> list[tuple[str, str, str, str]]:
    """(setting, value, confidence, rests on) for each setting shown, in the core's order."""
    out: list[tuple[str, str, str, str]] = []
    for key, label in LABELS.items():
        setting = cast("_InferredSetting | None", dict(settings).get(key))
        if setting is None:
            continue
        text = value_text(setting, seconds=key == "client_timeout_s")
        out.append((label, text, f"{setting['confidence']:.1f}", "; ".join(setting["evidence"])))
    return out


def title(settings: _InferredSettings) -> str:
    return f"{TITLE} ({settings['listener']})"

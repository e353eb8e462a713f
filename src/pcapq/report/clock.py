"""Times of day as every report writes them: UTC, to the millisecond."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_clock(epoch: float, with_date: bool = False) -> str:
    """"06:36:10.440", or with the date "2026-11-21 06:36:10.440" (UTC, no zone written)."""
    fmt = "%Y-%m-%d %H:%M:%S.%f" if with_date else "%H:%M:%S.%f"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime(fmt)[:-3]

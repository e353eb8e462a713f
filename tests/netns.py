"""The lab's NetnsPair (pcapq.lab.namespaces) for tests: a machine that cannot run it (not
root, a tool missing, no network namespaces) skips the test instead of failing it."""

from __future__ import annotations

import pytest

from pcapq.lab.errors import LabUnavailable
from pcapq.lab.namespaces import NetnsPair as _NetnsPair
from pcapq.lab.namespaces import unavailable_reason

__all__ = ["NetnsPair", "unavailable_reason"]


class NetnsPair(_NetnsPair):
    def __enter__(self) -> NetnsPair:
        try:
            super().__enter__()
        except LabUnavailable as e:
            pytest.skip(str(e))
        return self

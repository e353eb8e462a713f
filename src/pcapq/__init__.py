"""pcapq: explains why connections between a reverse proxy and its upstream failed.

The work happens in the Rust core (:mod:`pcapq._core`); this package renders and reasons.

>>> import pcapq
>>> result = pcapq.analyze(["captures/healthy.pcap"])      # doctest: +SKIP
>>> result.summary()["handshakes_completed"]               # doctest: +SKIP
"""

from pcapq._core import (
    JSON_SCHEMA_VERSION,
    Analysis,
    CaptureError,
    InternalError,
    PcapqError,
    __version__,
    analyze,
)

__all__ = [
    "JSON_SCHEMA_VERSION",
    "Analysis",
    "CaptureError",
    "InternalError",
    "PcapqError",
    "__version__",
    "analyze",
]

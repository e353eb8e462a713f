"""Where the capture was taken, from how the handshakes were timed there.

At the client (the proxy), a SYN-ACK comes one round trip after the SYN and the client's ACK
follows at once. At the server it is the other way round: the SYN-ACK leaves at once and the
ACK comes a round trip later. In between, both gaps are a part of the round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pcapq._core import _ServerStats

# A gap this small is the host's own reaction time, not a trip over the network.
LOCAL_S = 0.000_5
# One gap must be this many times the other to say which side the capture point is on.
RATIO = 4.0


@dataclass(frozen=True)
class CapturePoint:
    """Where the capture was taken, as the packets tell it, and why."""

    side: Literal["client", "server", "between", "unknown"]
    reason: str

    @property
    def proves_kernel_drops(self) -> bool:
        """At the server, an ACK seen and a SYN-ACK sent again proves the kernel dropped it."""
        return self.side == "server"

    @property
    def phrase(self) -> str:
        """Where the capture was taken, as words for a sentence."""
        return {
            "client": "captured at the client",
            "server": "captured at the server",
            "between": "captured between the hosts",
        }.get(self.side, "from an unknown capture point")

    def to_json(self) -> dict[str, str]:
        return {"side": self.side, "reason": self.reason}


def infer(servers: list[_ServerStats]) -> CapturePoint:
    """From the median handshake gaps over all servers, weighted by connections."""
    samples = [
        (s["syn_to_synack"], s["synack_to_ack"], s["connections"])
        for s in servers
        if s["syn_to_synack"] is not None and s["synack_to_ack"] is not None
    ]
    if not samples:
        return CapturePoint("unknown", "no handshake without retransmission to time")
    total = sum(n for _, _, n in samples)
    to_synack = sum(a * n for a, _, n in samples) / total
    to_ack = sum(b * n for _, b, n in samples) / total
    gaps = f"SYN to SYN-ACK {to_synack * 1000:.3f} ms, SYN-ACK to ACK {to_ack * 1000:.3f} ms"
    if to_synack <= LOCAL_S and to_ack <= LOCAL_S:
        return CapturePoint("unknown", f"the round trip is too short to tell the sides apart ({gaps})")
    if to_synack <= LOCAL_S and to_ack > RATIO * max(to_synack, 1e-6):
        return CapturePoint("server", f"the server answered SYNs at once and the ACKs came a round trip later ({gaps})")
    if to_ack <= LOCAL_S and to_synack > RATIO * max(to_ack, 1e-6):
        return CapturePoint("client", f"the SYN-ACKs came a round trip after the SYNs and the ACKs followed at once ({gaps})")
    return CapturePoint("between", f"both handshake gaps are part of the round trip ({gaps})")

"""One end of a TCP connection: an IP address and a port, written "10.0.0.2:9000" or
"[fd00::2]:9000", as the core writes them (src/flow/key.rs) and the reports show them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Endpoint:
    ip: str
    """The address without brackets, as the core writes it: "10.0.0.2", "fd00::2"."""
    port: int

    @classmethod
    def of(cls, ip: str, port: int) -> Endpoint:
        """The endpoint of address `ip` (IPv4 or IPv6, without brackets) and `port`, the address
        written as the core writes it ("FD00:0::2" becomes "fd00::2").

        Raises:
            ValueError: `ip` is no IP address, or `port` is not 0 to 65535.
        """
        import ipaddress  # 2 ms: only when an endpoint is read

        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is not 0 to 65535")
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            raise ValueError(f"{ip!r} is not an IP address") from None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            # As Rust writes it (Python before 3.13 writes ::ffff:a00:2).
            return cls(f"::ffff:{address.ipv4_mapped}", port)
        return cls(str(address), port)

    @property
    def v6(self) -> bool:
        return ":" in self.ip

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if self.v6 else f"{self.ip}:{self.port}"


def parse(text: str) -> Endpoint:
    """The endpoint `text` writes: "10.0.0.2:9000", "[fd00::2]:9000", or "fd00::2:9000" (an
    IPv6 address without brackets: its last colon is the port's, as HAProxy reads it).

    Raises:
        ValueError: `text` is not IP:PORT; the message says why.
    """
    if text.startswith("["):
        ip, sep, port = text[1:].partition("]:")
    else:
        ip, sep, port = text.rpartition(":")
    if not sep or not _PORT.fullmatch(port):
        raise ValueError(f"{text!r} is not IP:PORT (IPv6 as [address]:PORT)")
    try:
        return Endpoint.of(ip, int(port))
    except ValueError as e:
        raise ValueError(f"{text!r} is not IP:PORT: {e}") from None


def on_port(text: str, port: int) -> bool:
    """Whether `text`, an endpoint as the core writes it, is on `port`: without parsing it, for
    loops over every connection."""
    return text.endswith(f":{port}")

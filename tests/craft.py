"""Deterministic TCP conversations and capture files for tests.

scapy builds the IPv6/TCP packets and the TCP options, IPv4 packets are packed here exactly as
scapy builds them (much faster: some tests write thousands of connections); the capture files are written here byte by byte so that every
variant pcapq must read (both byte orders, micro/nanoseconds, pcapng sections, if_tsresol,
SPB/OPB blocks, each link type) can be produced exactly.

    conv = Conversation()
    conv.handshake()
    conv.send("client", 0.010, b"GET / HTTP/1.1\\r\\n\\r\\n")
    conv.resend("client", 0.210)             # the same segment again: a retransmission
    write_pcap(tmp_path / "x.pcap", conv.packets)
"""

from __future__ import annotations

import gzip as _gzip
import socket
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from pcapq.lab.delayline import checksum

START = 1_700_000_000.0

# LINKTYPE_* values (tcpdump.org/linktypes.html)
LINKTYPE = {
    "null": 0,
    "ethernet": 1,
    "raw": 101,
    "loop": 108,
    "sll": 113,
    "ipv4": 228,
    "ipv6": 229,
    "sll2": 276,
}


@dataclass
class Captured:
    """One packet: capture time (epoch seconds) and the IP packet's bytes."""

    time: float
    ip: bytes
    side: str = ""
    flags: str = ""
    vlan: tuple[int, ...] = ()
    """802.1Q tags of this frame (outer first; two: QinQ), for Ethernet; () takes the file's."""


@dataclass
class _Side:
    addr: str
    port: int
    isn: int
    next_seq: int = 0
    sent: list[tuple[int, str, bytes]] = field(default_factory=list)  # (seq, flags, payload)
    # IPv4 ID of the next packet (scapy's default 1 unless the conversation counts them).
    ip_id: int = 1


# TCP flag letters as scapy spells them, and their bits (RFC 9293 3.1; N: RFC 3540's NS).
_FLAG_BITS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20, "E": 0x40, "C": 0x80, "N": 0x100}


@lru_cache(maxsize=None)
def _tcp_options(options: tuple) -> bytes:
    """TCP options as scapy encodes them (padded to 32 bits): scapy writes each list once."""
    return bytes(TCP(options=list(options)))[20:]


def ipv4_tcp(src: str, dst: str, ip_id: int, sport: int, dport: int, seq: int, ack: int, flags: str, window: int,
             options: tuple = (), payload: bytes = b"") -> bytes:
    """An IPv4/TCP packet, byte for byte what scapy's IP(id=ip_id)/TCP(...)/Raw(payload) builds
    (tests/test_craft.py compares them), in a fraction of its time."""
    opts = _tcp_options(options) if options else b""
    bits = sum(_FLAG_BITS[f] for f in set(flags))
    offset_flags = ((20 + len(opts)) // 4) << 12 | bits
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq, ack, offset_flags, window, 0, 0) + opts + payload
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    check = checksum(s + d + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack("!H", check) + tcp[18:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), ip_id, 0, 64, 6, 0, s, d)
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + tcp


class Conversation:
    """A client/server TCP conversation with sequence numbers kept for you.

    Times are seconds after `start`. Every method appends to `packets` and returns the packet.
    """

    def __init__(
        self,
        client: tuple[str, int] = ("10.0.0.1", 40000),
        server: tuple[str, int] = ("10.0.0.2", 9000),
        client_isn: int = 1000,
        server_isn: int = 5000,
        start: float = START,
        window: int = 64240,
        packets: list[Captured] | None = None,
        new_ip_ids: bool = False,
    ) -> None:
        self.sides = {
            "client": _Side(client[0], client[1], client_isn, client_isn),
            "server": _Side(server[0], server[1], server_isn, server_isn),
        }
        self.start = start
        self.window = window
        self.packets: list[Captured] = packets if packets is not None else []
        self.ipv6 = ":" in client[0]
        # Give every IPv4 packet a new ID, as a connected Linux socket does. Off, every packet has
        # scapy's ID 1 (and the catalog regenerates byte for byte): identical segments sent with
        # nothing from the peer in between, such as duplicate ACKs crafted without the segments
        # they answer, are then copies of one frame (docs/diagnosis.md, "Duplicate frames").
        self.new_ip_ids = new_ip_ids

    def _peer(self, side: str) -> str:
        return "server" if side == "client" else "client"

    def segment(
        self,
        side: str,
        t: float,
        flags: str,
        payload: bytes = b"",
        seq: int | None = None,
        ack: int | None = None,
        window: int | None = None,
        options: list | None = None,
        advance: bool = True,
    ) -> Captured:
        """A raw segment. seq defaults to the side's next sequence number, ack to the peer's."""
        me, peer = self.sides[side], self.sides[self._peer(side)]
        seq = me.next_seq if seq is None else seq
        if ack is None:
            ack = peer.next_seq if "A" in flags else 0
        window = self.window if window is None else window
        if self.ipv6:
            pkt = IPv6(src=me.addr, dst=peer.addr) / TCP(sport=me.port, dport=peer.port, seq=seq % 2**32, ack=ack % 2**32,
                                                         flags=flags, window=window, options=options or [])
            wire = bytes(pkt / Raw(payload) if payload else pkt)
        else:
            wire = ipv4_tcp(me.addr, peer.addr, me.ip_id, me.port, peer.port, seq % 2**32, ack % 2**32, flags, window,
                            tuple(options or ()), payload)
        if self.new_ip_ids:
            me.ip_id = me.ip_id % 0xFFFF + 1
        if advance:
            end = seq + len(payload) + ("S" in flags) + ("F" in flags)
            if (end - me.next_seq) % 2**32 < 2**31:
                me.next_seq = end % 2**32
            me.sent.append((seq, flags, payload))
        captured = Captured(self.start + t, wire, side, flags)
        self.packets.append(captured)
        return captured

    def syn(self, t: float = 0.0, options: list | None = None) -> Captured:
        opts = options if options is not None else [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]
        me = self.sides["client"]
        if me.sent and "S" in me.sent[0][1]:
            return self.segment("client", t, "S", seq=me.isn, options=opts, advance=False)
        return self.segment("client", t, "S", seq=me.isn, options=opts)

    def synack(self, t: float = 0.0001, options: list | None = None) -> Captured:
        opts = options if options is not None else [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]
        me = self.sides["server"]
        ack = self.sides["client"].isn + 1
        if me.sent and "S" in me.sent[0][1]:
            return self.segment("server", t, "SA", seq=me.isn, ack=ack, options=opts, advance=False)
        return self.segment("server", t, "SA", seq=me.isn, ack=ack, options=opts)

    def ack(self, side: str = "client", t: float = 0.0002) -> Captured:
        return self.segment(side, t, "A")

    def handshake(self, t: float = 0.0, rtt: float = 0.0001) -> None:
        self.syn(t)
        self.synack(t + rtt)
        self.ack("client", t + 2 * rtt)

    def send(self, side: str, t: float, payload: bytes | int, flags: str = "PA") -> Captured:
        data = payload if isinstance(payload, bytes) else b"x" * payload
        return self.segment(side, t, flags, data)

    def resend(self, side: str, t: float, index: int = -1) -> Captured:
        """The side's `index`-th sent segment again, same sequence number and payload."""
        seq, flags, payload = self.sides[side].sent[index]
        ack = None if "A" in flags else 0
        if "S" in flags and side == "server":
            ack = self.sides["client"].isn + 1
        return self.segment(side, t, flags, payload, seq=seq, ack=ack, advance=False)

    def fin(self, side: str, t: float) -> Captured:
        return self.segment(side, t, "FA")

    def rst(self, side: str, t: float, with_ack: bool = True) -> Captured:
        return self.segment(side, t, "RA" if with_ack else "R", advance=False)

    def close(self, t: float, rtt: float = 0.0001) -> None:
        """Client FIN, server FIN, client ACK."""
        self.fin("client", t)
        self.fin("server", t + rtt)
        self.ack("client", t + 2 * rtt)


# ---------------------------------------------------------------------------------------------
# Link layers


def link_frame(ip: bytes, linktype: str, vlan: Sequence[int] = ()) -> bytes:
    """Wraps an IP packet in the link-layer header of `linktype` (a key of LINKTYPE)."""
    v6 = ip[0] >> 4 == 6
    ethertype = 0x86DD if v6 else 0x0800
    if linktype == "ethernet":
        head = b"\x00\x11\x22\x33\x44\x55" + b"\x66\x77\x88\x99\xaa\xbb"
        tags = b""
        tpids = [0x88A8] + [0x8100] * (len(vlan) - 1) if len(vlan) > 1 else [0x8100] * len(vlan)
        for tpid, vid in zip(tpids, vlan):
            tags += struct.pack(">HH", tpid, vid)
        return head + tags + struct.pack(">H", ethertype) + ip
    if linktype == "sll":
        return struct.pack(">HHH8sH", 0, 1, 6, b"\x00\x11\x22\x33\x44\x55\x00\x00", ethertype) + ip
    if linktype == "sll2":
        return struct.pack(">HHIHBB8s", ethertype, 0, 2, 1, 0, 6, b"\x00\x11\x22\x33\x44\x55\x00\x00") + ip
    if linktype in ("raw", "ipv4", "ipv6"):
        return ip
    if linktype == "null":
        # host byte order of the capturing machine; little-endian here
        return struct.pack("<I", 30 if v6 else 2) + ip
    if linktype == "loop":
        return struct.pack(">I", 24 if v6 else 2) + ip
    raise ValueError(linktype)


# ---------------------------------------------------------------------------------------------
# Classic pcap


def pcap_bytes(
    packets: Iterable[Captured],
    linktype: str = "ethernet",
    nano: bool = False,
    big_endian: bool = False,
    snaplen: int = 262144,
    vlan: Sequence[int] = (),
) -> bytes:
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = bytearray(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, LINKTYPE[linktype]))
    for p in packets:
        frame = link_frame(p.ip, linktype, p.vlan or vlan)
        captured = frame[:snaplen]
        units = 1_000_000_000 if nano else 1_000_000
        whole = int(p.time)
        frac = round((p.time - whole) * units)
        if frac >= units:
            whole, frac = whole + 1, frac - units
        out += struct.pack(e + "IIII", whole, frac, len(captured), len(frame)) + captured
    return bytes(out)


def write_pcap(path: Path | str, packets: Iterable[Captured], gzip: bool = False, **kw) -> Path:
    data = pcap_bytes(packets, **kw)
    path = Path(path)
    path.write_bytes(_gzip.compress(data, mtime=0) if gzip else data)
    return path


# ---------------------------------------------------------------------------------------------
# pcapng (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng)


def _pad4(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


def _block(e: str, block_type: int, body: bytes) -> bytes:
    body = _pad4(body)
    length = 12 + len(body)
    return struct.pack(e + "II", block_type, length) + body + struct.pack(e + "I", length)


def _option(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + _pad4(value)


def shb(big_endian: bool = False, comment: str | None = None) -> bytes:
    e = ">" if big_endian else "<"
    opts = b""
    if comment is not None:
        opts += _option(e, 1, comment.encode()) + _option(e, 0, b"")
    return _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + opts)


def idb(linktype: str = "ethernet", tsresol: int | None = None, big_endian: bool = False, snaplen: int = 0, tsoffset: int | None = None) -> bytes:
    e = ">" if big_endian else "<"
    opts = b""
    if tsresol is not None:
        opts += _option(e, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += _option(e, 14, struct.pack(e + "q", tsoffset))
    if opts:
        opts += _option(e, 0, b"")
    return _block(e, 1, struct.pack(e + "HHI", LINKTYPE[linktype], 0, snaplen) + opts)


def _units(tsresol: int | None) -> int:
    if tsresol is None:
        return 1_000_000
    if tsresol & 0x80:
        return 2 ** (tsresol & 0x7F)
    return 10**tsresol


def epb(p: Captured, linktype: str = "ethernet", interface: int = 0, tsresol: int | None = None, big_endian: bool = False, snaplen: int | None = None, vlan: Sequence[int] = (), tsoffset: int = 0) -> bytes:
    e = ">" if big_endian else "<"
    frame = link_frame(p.ip, linktype, vlan)
    captured = frame if snaplen is None else frame[:snaplen]
    ticks = round((p.time - tsoffset) * _units(tsresol))
    body = struct.pack(e + "IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(captured), len(frame)) + captured
    return _block(e, 6, body)


def spb(p: Captured, linktype: str = "ethernet", big_endian: bool = False) -> bytes:
    e = ">" if big_endian else "<"
    frame = link_frame(p.ip, linktype)
    return _block(e, 3, struct.pack(e + "I", len(frame)) + frame)


def opb(p: Captured, linktype: str = "ethernet", interface: int = 0, big_endian: bool = False) -> bytes:
    """Obsolete Packet Block (type 2): interface u16, drops u16, ts high/low, caplen, len."""
    e = ">" if big_endian else "<"
    frame = link_frame(p.ip, linktype)
    ticks = round(p.time * 1_000_000)
    body = struct.pack(e + "HHIIII", interface, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(frame), len(frame)) + frame
    return _block(e, 2, body)


def unknown_block(big_endian: bool = False) -> bytes:
    e = ">" if big_endian else "<"
    return _block(e, 0x0BAD, b"skip me")


def pcapng_bytes(packets: Iterable[Captured], linktype: str = "ethernet", tsresol: int | None = None, big_endian: bool = False, block: str = "epb") -> bytes:
    """One section, one interface, every packet in the given block type."""
    out = bytearray(shb(big_endian) + idb(linktype, tsresol, big_endian))
    for p in packets:
        if block == "epb":
            out += epb(p, linktype, 0, tsresol, big_endian)
        elif block == "spb":
            out += spb(p, linktype, big_endian)
        elif block == "opb":
            out += opb(p, linktype, 0, big_endian)
        else:
            raise ValueError(block)
    return bytes(out)


def write_pcapng(path: Path | str, packets: Iterable[Captured], gzip: bool = False, **kw) -> Path:
    data = pcapng_bytes(packets, **kw)
    path = Path(path)
    path.write_bytes(_gzip.compress(data, mtime=0) if gzip else data)
    return path

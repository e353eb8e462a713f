"""pcapq.endpoint: "ip:port" and "[v6]:port" read and written in one place."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

import pcapq
from pcapq.endpoint import Endpoint, on_port, parse


@pytest.mark.parametrize("text, ip, port, written", [
    ("10.0.0.2:9000", "10.0.0.2", 9000, "10.0.0.2:9000"),
    ("10.0.0.2:0", "10.0.0.2", 0, "10.0.0.2:0"),
    ("10.0.0.2:65535", "10.0.0.2", 65535, "10.0.0.2:65535"),
    ("10.0.0.2:09000", "10.0.0.2", 9000, "10.0.0.2:9000"),
    ("[fd00::2]:9000", "fd00::2", 9000, "[fd00::2]:9000"),
    ("[::1]:80", "::1", 80, "[::1]:80"),
    ("[FD00:0:0::2]:9000", "fd00::2", 9000, "[fd00::2]:9000"),
    # IPv4-mapped, as the core (Rust) writes it whatever Python's version.
    ("[::ffff:10.0.0.2]:80", "::ffff:10.0.0.2", 80, "[::ffff:10.0.0.2]:80"),
    ("[::ffff:a00:2]:80", "::ffff:10.0.0.2", 80, "[::ffff:10.0.0.2]:80"),
    # Without brackets the last colon is the port's (HAProxy's server lines).
    ("fd00::2:9000", "fd00::2", 9000, "[fd00::2]:9000"),
    ("[10.0.0.2]:9000", "10.0.0.2", 9000, "10.0.0.2:9000"),
])
def test_parse(text: str, ip: str, port: int, written: str) -> None:
    e = parse(text)
    assert e == Endpoint(ip, port)
    assert str(e) == written
    assert e.v6 == (":" in ip)


@pytest.mark.parametrize("text, why", [
    ("", "is not IP:PORT"),
    ("10.0.0.2", "is not IP:PORT"),
    ("10.0.0.2:", "is not IP:PORT"),
    ("10.0.0.2:http", "is not IP:PORT"),
    ("10.0.0.2:-1", "is not IP:PORT"),
    ("10.0.0.2: 80", "is not IP:PORT"),
    ("10.0.0.2:²", "is not IP:PORT"),
    ("10.0.0.2:123456", "is not IP:PORT"),
    ("10.0.0.2:65536", "port 65536 is not 0 to 65535"),
    ("[fd00::2]", "is not IP:PORT"),
    ("[fd00::2]:", "is not IP:PORT"),
    ("[fd00::2:9000", "is not IP:PORT"),
    ("fd00::2", "'fd00:' is not an IP address"),
    ("localhost:80", "'localhost' is not an IP address"),
    (":80", "'' is not an IP address"),
    ("10.0.0.256:80", "'10.0.0.256' is not an IP address"),
    ("[nohost]:80", "'nohost' is not an IP address"),
])
def test_parse_refuses_what_is_not_ip_port(text: str, why: str) -> None:
    with pytest.raises(ValueError) as e:
        parse(text)
    assert str(e.value).startswith(repr(text)) and why in str(e.value)


def test_of_checks_its_address_and_port() -> None:
    assert str(Endpoint.of("FD00::2", 443)) == "[fd00::2]:443"
    with pytest.raises(ValueError, match="'fd00::2]' is not an IP address"):
        Endpoint.of("fd00::2]", 443)
    with pytest.raises(ValueError, match="port 70000 is not 0 to 65535"):
        Endpoint.of("10.0.0.2", 70000)


def test_on_port_matches_the_whole_port() -> None:
    assert on_port("10.0.0.2:9000", 9000) and on_port("[fd00::2]:9000", 9000)
    assert not on_port("10.0.0.2:19000", 9000) and not on_port("10.0.0.2:9000", 900)


@pytest.mark.parametrize("capture", ["crafted/accept_queue_overflow.pcap", "crafted/icmpv6_no_route.pcap"])
def test_the_core_s_endpoints_read_back_as_written(capture: str) -> None:
    analysis = pcapq.analyze([str(REPO / "captures" / capture)], keep_connections=True)
    endpoints = {json.loads(analysis.connection_json(i))[side] for i in range(len(analysis)) for side in ("client", "server")}
    assert endpoints and any(e.startswith("[") for e in endpoints) == ("icmpv6" in capture)
    for text in endpoints:
        assert str(parse(text)) == text

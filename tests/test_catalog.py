"""The capture catalog (captures/): every crafted capture regenerates byte for byte from
captures/crafted/make.py, and every scenario has its real and its crafted capture (the kernel
runs of captures/kernel_runs/, competing explanations beside their twins, have no crafted one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pcapq.lab.catalog import SCENARIOS

REPO = Path(__file__).resolve().parent.parent
CRAFTED = REPO / "captures" / "crafted"
MAKE = CRAFTED / "make.py"
CRAFTED_ONLY = {
    "legacy_initial_rto",
    # Issue 12: what the kernel does not make on demand (capture artefacts, other stacks, the
    # start of a capture).
    "vlan_trunk_copies", "duplicate_frames", "duplicate_frames_retransmission", "windows_syn_after_rst", "dead_host",
    "answered_then_closed", "capture_mid_overflow",
    # Issue 18: another stack's retries, quotes of every length, IPv6 and VLANs (the lab runs IPv4
    # without tags), and an error the capture saw but the sender's kernel did not.
    "windows_syn_after_icmp", "icmp_quotes", "icmpv6_no_route", "icmp_in_vlan", "mtu_black_hole_icmp_ignored",
    # Materiality: findings too small to matter beside healthy exchanges.
    "minor_observations",
    # Copies a capture point makes (-i any on a router, segmentation offload) and their twins with a
    # real re-send; a host up and talking whose SYNs on one port are dropped.
    "router_any_copies", "router_any_resend", "offload_seen_twice", "offload_resend", "host_talking_syns_dropped",
    # One connection's full accept queue whose client's answers are stamped before the SYN-ACK (a
    # capture's ordering of the two directions), and its twin with loss.
    "overflow_in_ten_packets", "loss_in_ten_packets",
}
# The scenarios whose shipped capture is in captures/ itself.
IN_CAPTURES = {name for name, s in SCENARIOS.items() if not s.shipped_in}
# Issue 12: kernel behaviour that needs no crafted twin (the diagnosis tests read the real ones).
REAL_ONLY = {"defer_accept", "reuseport_stuck_listener", "firewall_drop", "tfo_fallback", "syn_scan", "connect_scan",
             "app_reset", "icmp_admin_prohibited", "icmp_port_unreachable", "icmp_host_unreachable",
             "icmp_route_prohibit", "route_blackhole", "icmp_ttl_exceeded", "mtu_black_hole", "mtu_black_hole_router",
             # Issue 15: a slow script behind nginx, with its logs (tests/test_evidence.py reads them).
             "nginx_php_fpm_slow",
             # An upstream that closes before answering (tests/test_verdicts.py crafts the outcomes).
             "nginx_php_fpm_killed", "keepalive_race", "nginx_php_fpm_max_requests",
             # Issue 28: HAProxy in front of an overflowing accept queue, with its log.
             "haproxy_overflow", "haproxy_http_overflow",
             # Proxy logs on real configurations: two HAProxy frontends, nginx's logs to the millisecond.
             "haproxy_frontends", "nginx_php_fpm_logs"}


def crafted_names() -> list[str]:
    return sorted(p.stem for p in CRAFTED.glob("*.pcap"))


def test_every_scenario_has_a_real_and_a_crafted_capture() -> None:
    real = {p.stem for p in (REPO / "captures").glob("*.pcap")}
    assert real == IN_CAPTURES
    assert set(crafted_names()) == (IN_CAPTURES - REAL_ONLY) | CRAFTED_ONLY
    for name, scenario in SCENARIOS.items():
        folder = REPO / "captures" / scenario.shipped_in
        # The offered-load runs are shipped gzipped (pcapq reads them as they are).
        assert (folder / f"{name}.pcap").exists() or (folder / f"{name}.pcap.gz").exists(), name
        assert (folder / f"{name}.nstat.txt").exists(), name
    assert (REPO / "captures" / "nginx_php_fpm.error.log").exists()
    assert (REPO / "captures" / "nginx_php_fpm.access.log").exists()


def test_the_catalog_is_small() -> None:
    # captures/whatif_runs/ has a budget of its own (tests/test_whatif_runs.py).
    total = sum(p.stat().st_size for p in (REPO / "captures").rglob("*")
                if p.is_file() and "whatif_runs" not in p.parts)
    assert total < 3_000_000, total


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crafted")
    subprocess.run([sys.executable, str(MAKE), "--out", str(out)], check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("name", crafted_names())
def test_crafted_capture_regenerates_byte_for_byte(regenerated: Path, name: str) -> None:
    shipped = (CRAFTED / f"{name}.pcap").read_bytes()
    fresh = (regenerated / f"{name}.pcap").read_bytes()
    assert fresh == shipped, f"{name}.pcap differs from what captures/crafted/make.py writes now"


def test_regenerated_twice_in_one_process_is_the_same(tmp_path: Path) -> None:
    """Nothing in the builder depends on state left by an earlier scenario (scapy's counters)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import make; from pathlib import Path;"
        "[make.make(n, Path(sys.argv[2])) for n in list(make.SCENARIOS)[::-1]]"
    )
    subprocess.run([sys.executable, "-c", code, str(CRAFTED), str(tmp_path)], check=True, timeout=300)
    for name in crafted_names():
        assert (tmp_path / f"{name}.pcap").read_bytes() == (CRAFTED / f"{name}.pcap").read_bytes(), name

"""Runs one catalog scenario for `pcapq lab` and captures/make_real.py: checks the machine,
narrates, runs it in fresh namespaces, writes the capture's companions (NAME.nstat.txt, and for
nginx_php_fpm NAME.error.log / NAME.access.log), and judges the run."""

from __future__ import annotations

import importlib.util
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Callable, Iterator

from pcapq.lab import counters
from pcapq.lab.catalog import SCENARIOS, Scenario
from pcapq.lab.errors import LabError, LabNeedsRoot, LabUnavailable
from pcapq.lab.namespaces import unavailable_reason
from pcapq.lab.scenarios import Run

# The catalog's addresses: client 10.231.1.1, server 10.231.1.2, or 10.232.1.2 behind NetnsRouted's
# router (each run has its own namespaces, so runs side by side do not collide).
SUBNET = 1


@dataclass
class LabResult:
    scenario: Scenario
    run: Run
    files: list[Path]
    problems: list[str]
    """Why the run did not go as the scenario means (client errors it should not have had,
    packets tcpdump dropped); empty when it did."""


def check_machine(scenario: Scenario) -> None:
    """Raises LabUnavailable when this machine cannot run `scenario`."""
    if os.geteuid() != 0:
        raise LabNeedsRoot("pcapq lab needs root to create network namespaces (run it with sudo)")
    reason = unavailable_reason(scenario.tools)
    if reason:
        raise LabUnavailable(reason)
    for module in scenario.python_modules:
        if importlib.util.find_spec(module) is None:
            raise LabUnavailable(f"needs the Python module {module}; install with: pip install 'pcapq[lab]' (or pip install {module})")


def companion(pcap: Path, suffix: str) -> Path:
    """out.pcap -> out.nstat.txt (suffix '.nstat.txt')."""
    return pcap.with_suffix("").with_name(pcap.with_suffix("").name + suffix)


def run_scenario(name: str, pcap: Path, say: Callable[[str], None] = lambda _line: None) -> LabResult:
    """Runs scenario `name`, writing the capture to `pcap`. Namespaces and processes are gone
    when this returns or raises (KeyboardInterrupt included)."""
    scenario = SCENARIOS[name]
    check_machine(scenario)
    say(f"scenario {name}: {scenario.lesson}")
    with _terminate_as_interrupt(), scenario.network(subnet=SUBNET, tools=scenario.tools, say=say) as net:
        if scenario.capture_at:
            net.capture_at(scenario.capture_at)
        say(f"tcpdump on {net.capture_if} in the {net.role(net.capture_ns)} namespace writes {pcap}; running the scenario")
        run = scenario.run(net, pcap)
        capture_point = f"tcpdump on {net.capture_if}, the {net.role(net.capture_ns)}'s veth"
    if scenario.capture_at:
        run.setup.append(capture_point)
    files = [pcap]
    nstat = companion(pcap, ".nstat.txt")
    nstat.write_text(counters.nstat_file(name, pcap.name, run.setup, run.sysctls, run.tcpdump, run.nstat_report()))
    files.append(nstat)
    for suffix in (".error.log", ".access.log", ".ss.txt", ".nginx.conf", ".haproxy.log", ".haproxy.cfg"):
        log = companion(pcap, suffix)
        if log.exists():
            files.append(log)
    problems = list(_problems(scenario, run))
    return LabResult(scenario, run, files, problems)


def _problems(scenario: Scenario, run: Run) -> Iterator[str]:
    meant = (scenario.client_error,) if isinstance(scenario.client_error, str) else scenario.client_error or ()
    for client in run.clients:
        error = client.get("error")
        if error and not any(m in error for m in meant):
            yield f"client on port {client.get('port')}: {error}"
    if run.tcpdump_dropped:
        yield f"tcpdump dropped {run.tcpdump_dropped} packets"
    if scenario.name.startswith("nginx_php_fpm") and not {"502", "504"} & set(run.extra.get("statuses", {})):
        yield f"nginx answered no 502 or 504 (statuses {run.extra.get('statuses')})"
    yield from _missing_signs(scenario.name, run)
    # The scenarios of twin_scenarios.py check themselves.
    yield from run.extra.get("not_as_meant", ())


def _missing_signs(name: str, run: Run) -> Iterator[str]:
    """What the kernel's counters must show for the issue-12 scenarios to have done their job."""
    if name == "defer_accept":
        if run.delta("TcpExtTCPDeferAcceptDrop") == 0:
            yield "no bare ACK was held back by TCP_DEFER_ACCEPT (TcpExtTCPDeferAcceptDrop 0)"
        if run.delta("TcpExtListenOverflows"):
            yield "the accept queue overflowed (TcpExtListenOverflows moved)"
    if name.startswith("reuseport_") and run.delta("TcpExtListenOverflows") == 0:
        yield "no connection overflowed the stuck listener (the hash sent too few to it); run it again"
    if name == "firewall_drop":
        if not run.extra.get("dropped"):
            yield "nftables dropped no SYN"
        if run.delta("TcpExtListenDrops"):
            yield "the listener dropped SYNs itself (TcpExtListenDrops moved)"
    if name == "tfo_fallback" and not run.extra.get("tfo_active_fail"):
        yield "no SYN carried data that the server refused (TcpExtTCPFastOpenActiveFail 0 on the client)"
    if name in ("syn_scan", "connect_scan") and run.extra.get("open_ports") != ["9000", "9001"]:
        yield f"nmap found open {run.extra.get('open_ports')}, not 9000 and 9001"
    if name in ("pmtu_discovery", "mtu_black_hole_router", "pmtu_server_side", "mtu_black_hole_server_side") \
            and not run.extra.get("frag_fails"):
        yield "the router forwarded every segment (IpFragFails 0): nothing was too big for its link"
    if name == "keepalive_race" and run.delta("TcpOutRsts") == 0:
        yield "the server sent no RST: no request came after its FIN (TcpOutRsts 0)"
    if name in ("mtu_black_hole_router", "mtu_black_hole_server_side") and not run.extra.get("icmp_dropped"):
        yield "nftables dropped no ICMP fragmentation needed in the router"


class _terminate_as_interrupt:
    """SIGTERM (and SIGHUP) raise KeyboardInterrupt while a scenario runs, so that `kill` cleans
    up as Ctrl-C does."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> None:
        self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}
        for s in self.SIGNALS:
            signal.signal(s, self._raise)

    @staticmethod
    def _raise(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


__all__ = ["LabError", "LabNeedsRoot", "LabResult", "LabUnavailable", "SCENARIOS", "check_machine", "run_scenario"]

"""Kernel runs that several tests read, each made once per test run (session fixtures, imported by
conftest.py). A test asks for the run by its fixture's name; the run itself is the lab's scenario
(pcapq.lab.catalog), with at most the extra outputs its readers need.

Every test that needs the kernel runs in one xdist group (conftest.py), so a session fixture here
is made once even when the suite runs on several workers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest

from pcapq.lab.catalog import SCENARIOS
from pcapq.lab.errors import LabUnavailable
from pcapq.lab.namespaces import NetnsPair, unavailable_reason
from pcapq.lab.runner import LabResult, run_scenario
from pcapq.lab.scenarios import Run

# Access logs as production nginx writes them: three log_formats of its own, each written by the
# same nginx_php_fpm run as NAME.access.log beside its combined access.log.
NGINX_ACCESS_LOGS = {
    "key_value": "'$msec $status rt=$request_time ua=$upstream_addr us=$upstream_status uct=$upstream_connect_time "
                 "uht=$upstream_header_time urt=$upstream_response_time'",
    "json": "escape=json '{\"msec\":\"$msec\",\"status\":\"$status\",\"upstream_addr\":\"$upstream_addr\","
            "\"upstream_status\":\"$upstream_status\",\"upstream_connect_time\":\"$upstream_connect_time\"}'",
    "log_format": "'$time_iso8601|$status|$upstream_addr|$upstream_connect_time|$upstream_response_time|$request'",
}


def run_variant(scenario: str, pcap: Path, run: Callable[[Any, Path], Any] | None = None, **changes: Any) -> LabResult:
    """The catalog's `scenario`, with its `run` (and other fields) replaced when given, written to
    `pcap`; skipped where this machine cannot run it."""
    reason = unavailable_reason(SCENARIOS[scenario].tools)
    if reason:
        pytest.skip(reason)
    if run is None and not changes:
        return run_scenario(scenario, pcap)
    name = f"{scenario}_{pcap.stem}"
    SCENARIOS[name] = dataclasses.replace(SCENARIOS[scenario], name=name, **({"run": run} if run else {}), **changes)
    try:
        return run_scenario(name, pcap)
    finally:
        del SCENARIOS[name]


@pytest.fixture(scope="session")
def nginx_lab(tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    """The lab's nginx_php_fpm scenario (nginx → php-fpm with an overflowing accept queue), its
    access log also written in each of NGINX_ACCESS_LOGS's formats: ng.pcap, ng.error.log,
    ng.access.log, ng.NAME.access.log, ng.nginx.conf, ng.nstat.txt, ng.ss.txt. nginx connects
    from its client's port, and ng.source.access.log says each request's (`$connection
    $remote_port`): the connection each line was about."""
    from pcapq.lab import scenarios

    pcap = tmp_path_factory.mktemp("nginx_lab") / "ng.pcap"
    return run_variant("nginx_php_fpm", pcap, run=lambda net, pcap: scenarios.nginx_php_fpm(
        net, pcap, pcap.with_suffix(""), access_logs={**NGINX_ACCESS_LOGS, "source": scenarios.MS_ACCESS_LOGS["source"]},
        bind_client_port=True))


# The kernel scenarios tests/test_kernel.py checks one by one, with the parameters it checks them
# with; tests/test_crosscheck.py holds the same runs to tshark's analysis.
KERNEL_SCENARIOS: dict[str, dict[str, Any]] = {
    "healthy": dict(connections=20, request=100, response=1000),
    "accept_queue_overflow": dict(connections=8, backlog=1, accept_delay=5.0, request=24, response=1000),
    "abort_on_overflow": dict(connections=9, backlog=3, accept_delay=2.0, request=24, response=1000),
    "syn_queue_overflow": dict(backlog=3, half_open=6, connections=3, synack_retries=1, client_delay=0.5, response=1000),
    "closed_port": dict(connections=5),
    "client_timeout_rst": dict(connections=3, timeout=1.0, reply_delay=1.5, pause=0.6, request=100),
    "packet_loss": dict(connections=20, loss_percent=4, response=16000),
}
# What a scenario needs beyond the namespaces' usual tools.
KERNEL_TOOLS = {"packet_loss": ("nft",)}


@pytest.fixture(scope="session")
def kernel_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """kernel_run(NAME): the run of scenario NAME (pcapq.lab.scenarios) with KERNEL_SCENARIOS's
    parameters, made the first time a test asks for it; skipped where it cannot run."""
    from pcapq.lab import scenarios

    made: dict[str, Run] = {}
    directory = tmp_path_factory.mktemp("kernel_runs")

    def run(name: str) -> Run:
        if name not in made:
            try:
                with NetnsPair(tools=("ip", "tcpdump", "tc", "nstat", *KERNEL_TOOLS.get(name, ()))) as net:
                    made[name] = getattr(scenarios, name)(net, directory / f"{name}.pcap", **KERNEL_SCENARIOS[name])
            except LabUnavailable as e:
                pytest.skip(str(e))
        return made[name]

    return run

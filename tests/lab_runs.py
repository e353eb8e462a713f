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
from pcapq.lab.namespaces import unavailable_reason
from pcapq.lab.runner import LabResult, run_scenario

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
    ng.access.log, ng.NAME.access.log, ng.nginx.conf, ng.nstat.txt, ng.ss.txt."""
    from pcapq.lab import scenarios

    pcap = tmp_path_factory.mktemp("nginx_lab") / "ng.pcap"
    return run_variant("nginx_php_fpm", pcap, run=lambda net, pcap: scenarios.nginx_php_fpm(
        net, pcap, pcap.with_suffix(""), access_logs=NGINX_ACCESS_LOGS))

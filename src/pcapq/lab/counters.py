"""The kernel's TCP counters (`nstat`) before and after a scenario, and the file written beside
its capture."""

from __future__ import annotations

import platform

from pcapq.evidence.counters import KEY_COUNTERS


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Counters that moved: name -> (before, after)."""
    names = sorted(set(before) | set(after))
    return {n: (before.get(n, 0), after.get(n, 0)) for n in names if before.get(n, 0) != after.get(n, 0)}


def report(before: dict[str, int], after: dict[str, int]) -> str:
    """A table of the counters that moved."""
    lines = [f"{'counter':<34}{'before':>10}{'after':>10}{'delta':>10}"]
    for name, (old, new) in changed(before, after).items():
        lines.append(f"{name:<34}{old:>10}{new:>10}{new - old:>10}")
    return "\n".join(lines)


def highlights(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """One line per key counter that moved: 'TcpExtListenOverflows +40: an ACK or SYN ...'."""
    moved = changed(before, after)
    return [f"{name} +{moved[name][1] - moved[name][0]}: {meaning}" for name, meaning in KEY_COUNTERS.items()
            if name in moved]


def nstat_file(name: str, capture: str, setup: list[str], sysctls: dict[str, str], tcpdump: str, table: str) -> str:
    """The text of NAME.nstat.txt: what was set up, the sysctls, tcpdump's counts, the table."""
    captured = [line.strip() for line in tcpdump.splitlines() if "packets" in line]
    lines = [
        f"# {capture}: `nstat -az` in the server namespace before and after; counters that moved.",
        f"# scenario {name}; kernel {platform.release()}",
        *(f"# {line}" for line in setup),
        *(f"# sysctl {key} = {value}" for key, value in sysctls.items()),
        f"# tcpdump: {'; '.join(captured)}",
        "",
        table,
        "",
    ]
    return "\n".join(lines)

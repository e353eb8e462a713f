"""`pcapq lab`: reproduce the catalog's scenarios with the real Linux kernel, in two network
namespaces joined by a veth pair (namespaces.py), with a small server and client (peers.py) or
nginx and php-fpm (scenarios.py), tcpdump on the server's side and the kernel's counters before
and after (counters.py). catalog.py lists the scenarios; runner.py runs one."""

from pcapq.lab.errors import LabError, LabUnavailable

__all__ = ["LabError", "LabUnavailable"]

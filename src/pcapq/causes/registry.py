"""Every cause pcapq can name, one module each. To add a cause: write its module (a `CAUSE`, an
`EpisodeCause` or a `CaptureCause`, with its words, scope, precedence and rule) and add its name
to NAMES here."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Literal, overload

from pcapq.causes.cause import CaptureCause, Cause, EpisodeCause

if TYPE_CHECKING:
    from pcapq.causes.cause import Scope

# The modules of pcapq.causes that hold a cause (its `CAUSE`). Their order is not the rules':
# each cause's precedence is.
NAMES = [
    "port_scan",
    "syn_flood",
    "firewall_reject",
    "no_route",
    "no_such_port",
    "ttl_exceeded",
    "mtu_black_hole",
    "closed_port",
    "accept_queue_overflow",
    "syn_queue_overflow",
    "listen_drops",
    "syns_filtered",
    "silent_host",
    "reordering",
    "network_loss",
    "server_closed",
    "slow_server",
    "client_gave_up",
    "port_reuse",
    "port_exhaustion",
    "unix_socket_overflow",
    "unix_socket_failure",
]

MODULES: list[ModuleType] = [import_module(f"pcapq.causes.{name}") for name in NAMES]


def _cause(module: ModuleType) -> Cause:
    cause = module.CAUSE
    if not isinstance(cause, Cause):
        raise TypeError(f"{module.__name__}.CAUSE is a {type(cause).__name__}, not a Cause")
    return cause


CAUSES: dict[str, Cause] = {c.slug: c for c in sorted(map(_cause, MODULES), key=lambda c: c.precedence)}
SLUGS: list[str] = list(CAUSES)


@overload
def in_order(scope: Literal["episode"]) -> list[EpisodeCause]: ...
@overload
def in_order(scope: Literal["capture", "server", "evidence"]) -> list[CaptureCause]: ...
def in_order(scope: Scope) -> list[EpisodeCause] | list[CaptureCause]:
    """The causes of one scope, in precedence order."""
    if scope == "episode":
        return [c for c in CAUSES.values() if isinstance(c, EpisodeCause)]
    return [c for c in CAUSES.values() if c.scope == scope and isinstance(c, CaptureCause)]


def title(slug: str) -> str:
    c = CAUSES.get(slug)
    return c.title if c else slug.replace("_", " ")


def phrase(slug: str) -> str:
    c = CAUSES.get(slug)
    return c.phrase if c else slug.replace("_", " ")

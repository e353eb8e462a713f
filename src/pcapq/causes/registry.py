"""Every cause pcapq can name, one module each. To add a cause: write its module (a `CAUSE`, an
`EpisodeCause` or a `CaptureCause`, with its words, scope, precedence and rule) and add one line
here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

from pcapq.causes import (
    accept_queue_overflow,
    client_gave_up,
    closed_port,
    firewall_reject,
    listen_drops,
    mtu_black_hole,
    network_loss,
    no_route,
    no_such_port,
    port_exhaustion,
    port_reuse,
    port_scan,
    server_closed,
    silent_host,
    slow_server,
    syn_flood,
    syn_queue_overflow,
    syns_filtered,
    ttl_exceeded,
    unix_socket_failure,
    unix_socket_overflow,
)
from pcapq.causes.cause import CaptureCause, Cause, EpisodeCause

if TYPE_CHECKING:
    from pcapq.causes.cause import Scope

MODULES = [
    port_scan,
    syn_flood,
    firewall_reject,
    no_route,
    no_such_port,
    ttl_exceeded,
    mtu_black_hole,
    closed_port,
    accept_queue_overflow,
    syn_queue_overflow,
    listen_drops,
    syns_filtered,
    silent_host,
    network_loss,
    server_closed,
    slow_server,
    client_gave_up,
    port_reuse,
    port_exhaustion,
    unix_socket_overflow,
    unix_socket_failure,
]

CAUSES: dict[str, Cause] = {m.CAUSE.slug: m.CAUSE for m in sorted(MODULES, key=lambda m: m.CAUSE.precedence)}
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

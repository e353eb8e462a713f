"""Every dict the core returns has the shape its TypedDict in src/pcapq/_core.pyi says: the same
keys (none missing, none extra, NotRequired ones aside) and values of the types named, walked
recursively through nested TypedDicts, lists, dicts, tuples, unions, Optional and Literal. The
core builds these dicts by hand in Rust; mypy trusts the stub, so a key renamed on one side only
would pass every type check and fail here.

Over the shipped captures (captures/*.pcap), calling each public method of Analysis, Problems,
Episode and Selection that returns data; and VOCABULARY, a log join, an annotated capture,
`align_points` on two points of the kernel runs, and LiveInput's looks at a followed capture."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from conftest import REPO

import pcapq
from pcapq import _core

CAPTURES = sorted((REPO / "captures").glob("*.pcap"))


def load_stub() -> types.ModuleType:
    """src/pcapq/_core.pyi as a module of its own, its annotations left as strings (a stub names
    classes before it defines them) and resolved by `get_type_hints`."""
    source = "from __future__ import annotations\n" + (REPO / "src" / "pcapq" / "_core.pyi").read_text()
    spec = importlib.util.spec_from_loader("pcapq_core_stub", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(source, "_core.pyi", "exec"), module.__dict__)
    return module


STUB = load_stub()


def hints(target: Any) -> dict[str, Any]:
    """The annotations of a stub class, function or module, resolved (NotRequired kept)."""
    return get_type_hints(target, globalns=vars(STUB), include_extras=True)


def returns(cls: type, member: str) -> Any:
    """The type a method (or a property) of a stub class returns."""
    target = getattr(cls, member)
    return hints(target.fget if isinstance(target, property) else target)["return"]



def check(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Where `value` departs from `tp`: one line per departure, [] when it fits."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any or tp is object:
        return []
    if origin is NotRequired or origin is typing.Final:
        return check(value, args[0], path)
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: {value!r} is not None"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where {tp.__name__} (a dict) was expected"]
        fields = hints(tp)
        # A string annotation hides NotRequired from the class's own __optional_keys__.
        optional = set(tp.__optional_keys__) | {k for k, h in fields.items() if get_origin(h) is NotRequired}
        problems = [f"{path}: key {k!r} missing from {tp.__name__}" for k in sorted(set(fields) - optional - set(value))]
        problems += [f"{path}: key {k!r} is not in {tp.__name__}" for k in sorted(set(value) - set(fields))]
        for key in sorted(set(value) & set(fields)):
            problems += check(value[key], fields[key], f"{path}.{key}")
        return problems
    if origin is Union or origin is types.UnionType:
        tried = [check(value, arg, path) for arg in args]
        return [] if any(not t for t in tried) else [f"{path}: {value!r:.80} is none of {tp}"] + min(tried, key=len)
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin in (list, Sequence):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} where a list was expected"]
        return [p for i, item in enumerate(value) for p in check(item, args[0], f"{path}[{i}]")] if args else []
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where a dict was expected"]
        return [p for k, v in value.items() for p in check(k, args[0], f"{path} key") + check(v, args[1], f"{path}[{k!r}]")]
    if origin is tuple:
        if not isinstance(value, tuple) and not isinstance(value, list):
            return [f"{path}: {type(value).__name__} where a tuple was expected"]
        if len(args) == 2 and args[1] is Ellipsis:
            return [p for i, item in enumerate(value) for p in check(item, args[0], f"{path}[{i}]")]
        if len(value) != len(args):
            return [f"{path}: {len(value)} items where {len(args)} were expected"]
        return [p for i, (item, arg) in enumerate(zip(value, args)) for p in check(item, arg, f"{path}[{i}]")]
    if origin is set:
        return [] if isinstance(value, (set, frozenset)) else [f"{path}: {type(value).__name__} where a set was expected"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: {value!r} is not a float"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: {value!r} is not an int"]
    if isinstance(tp, type):
        return [] if isinstance(value, tp) else [f"{path}: {type(value).__name__} where {tp.__name__} was expected"]
    raise TypeError(f"{path}: the walker does not know {tp!r}")


def analysis_values(path: Path) -> list[tuple[str, Any, Any]]:
    """(what, value, its type in the stub) for every method of an analysis of `path` that returns
    data, and of its problems, episodes and selections."""
    a = pcapq.analyze([str(path)])
    A, P, E, S = STUB.Analysis, STUB.Problems, STUB.Episode, STUB.Selection  # noqa: N806
    out: list[tuple[str, Any, Any]] = [
        ("summary()", a.summary(), returns(A, "summary")),
        ("captures()", a.captures(), returns(A, "captures")),
        ("skipped()", a.skipped(), returns(A, "skipped")),
        ("warnings()", a.warnings(), returns(A, "warnings")),
        ("servers()", a.servers(), returns(A, "servers")),
        ("worst(5)", a.worst(5), returns(A, "worst")),
        ("worst_rows(5)", a.worst_rows(5), returns(A, "worst_rows")),
        ("port_pressure()", a.port_pressure(), returns(A, "port_pressure")),
        ("one_syn()", a.one_syn(), returns(A, "one_syn")),
        ("timeline()", a.timeline(), returns(A, "timeline")),
        ("proxy_timeouts()", a.proxy_timeouts(), returns(A, "proxy_timeouts")),
        ("inferred_settings()", a.inferred_settings(), returns(A, "inferred_settings")),
        ("connections()", a.connections(), list[STUB._Connection]),
        ("connections(lean=True)", a.connections(lean=True), list[STUB._LeanConnection]),
    ]
    for i in range(len(a))[:20]:
        out.append((f"connection_json({i})", json.loads(a.connection_json(i)), STUB._Connection))
        out.append((f"connection_labels({i})", a.connection_labels(i), returns(A, "connection_labels")))
    servers = [s["server"] for s in a.servers()]
    for server in servers[:3]:
        out.append((f"timeline({server})", a.timeline(server), returns(A, "timeline")))
        out.append((f"waiting_at({server})", a.waiting_at(server, [s["first_time"] for s in a.servers() if s["server"] == server]), returns(A, "waiting_at")))
    problems = a.problems()
    out += [
        ("problems().servers()", problems.servers(), returns(P, "servers")),
        ("problems().scans()", problems.scans(), returns(P, "scans")),
        ("problems().timings()", problems.timings(), returns(P, "timings")),
    ]
    for server in problems.servers():
        for episode in problems.episodes(server):
            selection = episode.select()
            out += [
                ("episode.server", episode.server, returns(E, "server")),
                ("episode.first", episode.first, returns(E, "first")),
                ("selection.ids", selection.ids, returns(S, "ids")),
                ("selection.first", selection.first, returns(S, "first")),
                ("selection.checks", selection.checks, returns(S, "checks")),
                ("problems().examples()", problems.examples(selection, 3), returns(P, "examples")),
                ("problems().earliest_ack()", problems.earliest_ack(selection), returns(P, "earliest_ack")),
            ]
    return out


def test_the_stub_loads_as_python() -> None:
    # A TypedDict the walker sees with its NotRequired keys.
    assert is_typeddict(STUB._Connection) and is_typeddict(STUB._Summary)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_value_of_an_analysis_has_its_stub_type(path: Path) -> None:
    problems = [p for what, value, tp in analysis_values(path) for p in check(value, tp, what)]
    assert problems == []


def test_vocabulary_has_its_stub_type() -> None:
    assert check(_core.VOCABULARY, hints(STUB)["VOCABULARY"], "VOCABULARY") == []


def test_a_log_join_has_its_stub_type() -> None:
    from pcapq.evidence import read, tie_connections

    analysis = pcapq.analyze([str(REPO / "captures" / "nginx_php_fpm.pcap")])
    logs = read(logs=(str(REPO / "captures" / "nginx_php_fpm.error.log"), str(REPO / "captures" / "nginx_php_fpm.access.log"))).logs
    assert check(tie_connections(analysis, logs).result, returns(STUB.Analysis, "join_log"), "join_log") == []


def test_an_annotated_capture_has_its_stub_type(tmp_path: Path) -> None:
    path = str(REPO / "captures" / "accept_queue_overflow.pcap")
    analysis = pcapq.analyze([path])
    written = analysis.write_annotated([path], str(tmp_path / "out.pcapng"), None, [], "")
    assert check(written, returns(STUB.Analysis, "write_annotated"), "write_annotated") == []


def test_a_whatif_replay_has_its_stub_type() -> None:
    analysis = pcapq.analyze([str(REPO / "captures" / "accept_queue_overflow.pcap")])
    run = {"backlog": 1, "workers": 1, "syncookies": 1, "synack_retries": 5, "syn_retries": 6,
           "syn_linear_timeouts": 4, "client_timeout_s": 5.0, "abort_on_overflow": False}
    value = analysis.whatif("10.231.1.2:9000", 1, [run])
    assert check(value, returns(STUB.Analysis, "whatif"), "whatif") == []
    settings = analysis.inferred_settings()
    assert check(settings, returns(STUB.Analysis, "inferred_settings"), "inferred_settings") == []


def test_two_aligned_points_have_their_stub_type() -> None:
    runs = REPO / "captures" / "kernel_runs"
    first, second = runs / "crossed_synack_client.pcap", runs / "crossed_synack.pcap"
    value = _core.align_points([str(first)], [str(second)], ("client", "server"))
    assert check(value, hints(STUB.align_points)["return"], "align_points") == []


def test_the_walker_finds_a_renamed_or_missing_key() -> None:
    summary = pcapq.analyze([str(CAPTURES[0])]).summary()
    tp = returns(STUB.Analysis, "summary")
    assert check(summary, tp) == []
    renamed = dict(summary)
    renamed["packet_count"] = renamed.pop("packets")
    assert check(renamed, tp) == ["$: key 'packets' missing from _Summary", "$: key 'packet_count' is not in _Summary"]
    assert check({**summary, "packets": "many"}, tp) == ["$.packets: 'many' is not an int"]


def test_a_watched_capture_has_its_stub_type() -> None:
    """`LiveInput.look` and `metrics` while a capture is followed, and the summary with `keep_s`."""
    import threading
    import time

    live = _core.LiveInput()
    path = REPO / "captures" / "accept_queue_overflow.pcap"
    done: list[Any] = []
    reader = threading.Thread(target=lambda: done.append(_core.analyze_stdin(live, watch=True, follow=str(path), keep_s=60.0)))
    reader.start()
    deadline = time.monotonic() + 20
    while live.bytes < path.stat().st_size and time.monotonic() < deadline:
        time.sleep(0.05)
    values = [("look()", live.look(), returns(STUB.LiveInput, "look")), ("metrics()", live.metrics(), returns(STUB.LiveInput, "metrics"))]
    live.stop(now=True)
    reader.join(20)
    values.append(("look(end=True)", live.look(end=True), returns(STUB.LiveInput, "look")))
    (analysis,) = done
    values.append(("summary()", analysis.summary(), returns(STUB.Analysis, "summary")))
    assert [p for what, value, tp in values for p in check(value, tp, what)] == []

#!/usr/bin/env python3
"""Times pcapq against tshark, tcptrace and `cat` on one page-cached capture; prints a table.

    python bench/run.py                      # 1M-packet capture in bench/out/ (made if missing)
    python bench/run.py dump.pcap --runs 5   # your own capture
    python bench/run.py --skip tshark,tcptrace
    python bench/run.py --memory             # pcapq's peak RSS on a 5M-packet capture
    python bench/curve.py --core                  # cost per packet and peak RSS as the capture grows

Each tool runs --runs times (rounds interleave the tools); the table shows the best and the
median wall time, the least CPU time and the peak RSS (GNU time's %M). Results also go to
bench/out/results.json (results-memory.json for --memory). See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH))

from measure import generated  # noqa: E402

TARGET_PPS = 5_000_000
TARGET_CORE_PPS = 8_000_000
# `pcapq analyze` of a capture of a few packets: interpreter start-up, imports, the report.
TARGET_FIXED_S = 0.060
# The capture for that row, in the repository.
SMALL_CAPTURE = BENCH.parent / "captures" / "healthy.pcap"
# The interpreter's start-up and the imports of a text `pcapq analyze` (issue 13).
TARGET_IMPORTS_S = 0.060
TARGET_VS_TSHARK = 100
TARGET_RSS_MIB = 200  # MiB, as GNU time and ps count (KiB)
TARGET_GZIP_RATIO = 1.5  # pcapq analyze on the gzip copy, over the plain capture
TARGET_ANNOTATE_RATIO = 2.0  # pcapq annotate (every connection labelled, the pcapng written), over pcapq analyze
MEMORY_PACKETS = 5_000_000
# diagnose() (the registry's rules over the core's episodes) against the whole default run.
TARGET_DIAGNOSE_SHARE = 0.10

# Runs pcapq's core through the Python API in one process: start-up is not in these times.
CORE_SCRIPT = """
import json, sys, time
t = time.perf_counter()
import pcapq
imported = time.perf_counter() - t
path, runs = sys.argv[1], int(sys.argv[2])
from pcapq.diagnose import diagnose
times = []
cpu = []
diagnosis = []
for _ in range(runs):
    t, c = time.perf_counter(), time.process_time()
    result = pcapq.analyze([path], keep_connections=False, keep_events=False)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    summary = result.summary()
    t = time.perf_counter()
    diagnose(result)
    diagnosis.append(time.perf_counter() - t)
    del result
print(json.dumps({"times": times, "cpu_s": cpu, "import_s": imported, "summary": summary, "diagnose_s": diagnosis}))
"""

# Runs a text `pcapq analyze FILE` in this process as the console script does (argv: FILE, then
# the console script's entry point, MODULE:FUNCTION), its report to /dev/null, and prints whether
# it left the cyclic garbage collector on ("gc" or "no-gc"), then the modules it imported, one a
# line. It imports nothing itself beyond what start-up has (os, sys, gc).
IMPORTED_SCRIPT = """
import gc, os, sys
capture, entry = sys.argv[1:3]
sys.argv = ["pcapq", "analyze", capture]
sys.stdout = open(os.devnull, "w")
module, function = entry.split(":")
try:
    getattr(__import__(module, fromlist=[function]), function)()
except SystemExit:
    pass
sys.stdout = sys.__stdout__
print("gc" if gc.isenabled() else "no-gc")
print("\\n".join(m for m in sys.modules if m != "__main__"))
"""

GNU_TIME = os.access("/usr/bin/time", os.X_OK)

TOOLS = ["pcapq-text", "pcapq-json", "pcapq-html", "pcapq-annotate", "pcapq-core", "pcapq-1thread", "pcapq-gzip", "pcapq-startup", "pcapq-imports", "pcapq-fixed", "python-startup", "cat", "tshark", "tcptrace"]


def pcapq_command() -> list[str]:
    exe = shutil.which("pcapq")
    return [exe] if exe else [sys.executable, "-m", "pcapq.cli"]


def imported_modules(entry: str | None = None) -> tuple[list[str], bool]:
    """The modules a text `pcapq analyze` of the small capture imports, in the order it first
    imported them, and whether it ran with the cyclic garbage collector on: found now, by running
    it, so that they follow the code. `entry`: the console script's MODULE:FUNCTION (default: the
    installed pcapq's)."""
    if entry is None:
        from importlib.metadata import entry_points

        entry = next(iter(entry_points(group="console_scripts", name="pcapq"))).value
    res = subprocess.run([sys.executable, "-c", IMPORTED_SCRIPT, str(SMALL_CAPTURE), entry], capture_output=True, text=True, check=True)
    collector, *modules = res.stdout.split()
    return modules, collector == "gc"


def imports_script(modules: list[str], collector: bool = True) -> str:
    """A program that imports `modules` in order and does nothing else; with the cyclic garbage
    collector off first unless `collector`, as pcapq's console script turns it off."""
    off = "" if collector else "import gc\ngc.disable()\n"
    return f"# {len(modules)} modules\n{off}for m in {tuple(modules)!r}:\n    __import__(m)\n"


def byte_compile_pcapq() -> None:
    """Writes the bytecode of the installed pcapq's modules that is missing or older than their
    source. An editable install compiles a module when it is first imported, but not where
    PYTHONDONTWRITEBYTECODE is set: every run then compiles each module changed since its last
    bytecode again, and the start-up rows time the compiler."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("pcapq")
    for where in (spec.submodule_search_locations or []) if spec else []:
        if not compileall.compile_dir(where, quiet=2, workers=1):
            print(f"warning: could not write the bytecode of {where}: start-up times include compiling", file=sys.stderr)


def gzipped(capture: Path, data: Path) -> Path:
    """The capture compressed with `gzip -1` (as a rotating tcpdump's -z gzip would be, fast),
    made in `data` once."""
    gz = data / (capture.name + ".gz")
    if not gz.exists() or gz.stat().st_mtime < capture.stat().st_mtime:
        print(f"compressing {capture} to {gz} ...", file=sys.stderr)
        with open(gz, "wb") as out:
            subprocess.run(["gzip", "-1", "-c", str(capture)], stdout=out, check=True)
    return gz


def commands(capture: str, gz: str | None = None, imported: tuple[list[str], bool] | None = None) -> dict[str, tuple[list[str], str | None]]:
    """Tool name -> (argv, where its stdout goes: a file name in bench/out, or None for /dev/null).
    `imported`: what the imports row imports, and with the collector on or not (`imported_modules()`)."""
    pq = pcapq_command()
    return {
        "pcapq-text": (pq + ["analyze", capture], "pcapq-summary.txt"),
        # The same on one thread: reading, decoding and tracking one after the other.
        "pcapq-1thread": (["env", "PCAPQ_ONE_THREAD=1"] + pq + ["analyze", capture], None),
        "pcapq-gzip": (pq + ["analyze", gz or capture + ".gz"], None),
        "pcapq-json": (pq + ["analyze", "--format", "json", "-o", "/dev/null", capture], None),
        "pcapq-html": (pq + ["analyze", "--format", "html", "-o", "/dev/null", capture], None),
        # The capture written back as pcapng with every connection's words (bench/out: the file
        # is as big as the capture, and written there once per run).
        "pcapq-annotate": (pq + ["annotate", "-o", str(OUT / "annotated.pcapng"), capture], None),
        "pcapq-core": ([sys.executable, "-c", CORE_SCRIPT, capture], "pcapq-core.json"),
        "pcapq-startup": (pq + ["--version"], None),
        # A fresh interpreter importing what a text `pcapq analyze` imports, and nothing run.
        "pcapq-imports": ([sys.executable, "-c", imports_script(*(imported or ([], True)))], None),
        # What every `pcapq analyze` costs besides its capture: start-up, imports, diagnosis, report.
        "pcapq-fixed": (pq + ["analyze", str(SMALL_CAPTURE)], None),
        # The interpreter alone (with whatever .pth files its site-packages run), for comparison.
        "python-startup": ([sys.executable, "-c", "pass"], None),
        "cat": (["cat", capture], None),
        "tshark": (["tshark", "-2", "-r", capture, "-q", "-z", "io,stat,0,tcp.analysis.retransmission"], "tshark-iostat.txt"),
        "tcptrace": (["tcptrace", "-n", "-l", capture], None),
    }


def shown(argv: list[str], stdout: str | None) -> str:
    if argv == [sys.executable, "-c", "pass"]:
        return "python -c pass"
    if argv[:2] == [sys.executable, "-c"] and argv[2].startswith("# "):
        count = argv[2].split()[1]
        off = "gc.disable(); " if "gc.disable()" in argv[2] else ""
        return f"python -c '{off}for m in MODULES: __import__(m)' (the {count} modules a text pcapq analyze imports)"
    if argv[:2] == [sys.executable, "-c"]:
        return "python -c 'import pcapq; pcapq.analyze([FILE], keep_connections=False, keep_events=False)' (--runs times in one process)"
    pq = shutil.which("pcapq")
    words = ["pcapq" if a == pq else a for a in argv]
    if words[:1] == ["env"]:
        words = words[1:]
    return " ".join(words) + (f" > bench/out/{stdout}" if stdout else " > /dev/null")


def measure(argv: list[str], stdout: str | None) -> tuple[float, float, int, int]:
    """Runs argv once: (wall seconds, user+system CPU seconds, peak RSS in KiB, exit status).

    A child's ru_maxrss starts at its parent's high-water mark (it survives fork and exec), so
    the RSS comes from GNU time, a small parent; the wall time from perf_counter around it.
    """
    sink = open(OUT / stdout, "wb") if stdout else open(os.devnull, "wb")
    rss_file = OUT / "time-rss.txt"
    timed = ["/usr/bin/time", "-q", "-f", "%M", "-o", str(rss_file)] + argv if GNU_TIME else argv
    with sink, open(OUT / "stderr.txt", "ab") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(timed, stdout=sink, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss
    if GNU_TIME:
        lines = rss_file.read_text().split()
        rss = int(lines[-1]) if lines and lines[-1].isdigit() else rss
    return wall, usage.ru_utime + usage.ru_stime, rss, proc.returncode


def count_packets(path: Path) -> int | None:
    """Records in a classic pcap file, from the sidecar generate.py wrote or by walking headers."""
    side = Path(str(path) + ".json")
    if side.exists():
        info = json.loads(side.read_text())
        if info.get("bytes") == path.stat().st_size:
            return int(info["packets"])
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            return None
        rec = struct.Struct("<IIII" if head[0] in (0xD4, 0x4D) else ">IIII")
        n = 0
        while True:
            h = f.read(16)
            if len(h) < 16:
                return n
            f.seek(rec.unpack(h)[2], 1)
            n += 1


def warm(path: Path) -> str:
    """Reads the file once so every tool reads it from the page cache; says how much is cached."""
    avail = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            avail = int(line.split()[1]) * 1024
    if path.stat().st_size > avail * 0.8:
        print(f"warning: {path} is larger than 80% of available memory; it will not stay cached", file=sys.stderr)
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass
    if shutil.which("fincore"):
        res = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip().isdigit():
            return f"{100 * int(res.stdout.strip()) / max(1, path.stat().st_size):.0f}% of the file in the page cache"
    return "read once"


def version(argv: list[str]) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (res.stdout + res.stderr).strip().splitlines()
    return next((line for line in text if "version" in line.lower() or line.startswith("TShark")), text[0] if text else None)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def git_state() -> dict:
    """Which pcapq was timed: where the imported package lives, its commit, when _core was built."""
    res = subprocess.run([sys.executable, "-c", "import pcapq._core as c, pcapq; print(pcapq.__file__); print(c.__file__)"], capture_output=True, text=True)
    if res.returncode != 0:
        return {"package": None, "commit": None, "dirty": None, "core_built": None}
    package, core = (Path(line) for line in res.stdout.split())
    def git(*a: str) -> str:
        out = subprocess.run(["git", "-C", str(package.parent), *a], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""
    built = datetime.datetime.fromtimestamp(core.stat().st_mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    commit = git("rev-parse", "--short", "HEAD") or None
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "src", "Cargo.toml", "Cargo.lock", "pyproject.toml")) if commit else None
    return {"package": str(package.parent), "commit": commit, "dirty": dirty, "core_built": built}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), platform.processor())
    mem = next((int(line.split()[1]) // 1024 for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")), 0)
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_mib": mem, "kernel": platform.release(), "python": platform.python_version()}


def tshark_retransmissions() -> int | None:
    """The frame count from tshark's io,stat table (the one interval row)."""
    path = OUT / "tshark-iostat.txt"
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if "<>" in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[1].split()[0].isdigit():
                return int(cells[1].split()[0])
    return None


def run(args: argparse.Namespace) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "stderr.txt").write_bytes(b"")
    packets_wanted = args.packets or (MEMORY_PACKETS if args.memory else 1_000_000)
    if args.capture:
        capture = Path(args.capture).resolve()
        if not capture.exists():
            sys.exit(f"run.py: {capture}: no such file")
    else:
        capture = generated(packets_wanted, args.data, args.seed)

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - set(TOOLS) - {"pcapq", "tshark", "tcptrace"}
    if unknown:
        sys.exit(f"run.py: --skip: unknown {', '.join(sorted(unknown))}; choose from {', '.join(TOOLS)}")
    if args.memory:
        skip |= {"tshark", "tcptrace", "pcapq-gzip", "pcapq-1thread"}
    tools = [t for t in TOOLS if t not in skip and not ("pcapq" in skip and t.startswith("pcapq"))]
    for t in ("tshark", "tcptrace"):
        if t in tools and not shutil.which(t):
            print(f"warning: {t} is not installed; skipped", file=sys.stderr)
            tools.remove(t)

    size = capture.stat().st_size
    packets = count_packets(capture)
    cached = warm(capture)
    if not GNU_TIME:
        print("warning: /usr/bin/time is missing (apt-get install time): peak RSS includes this script's own", file=sys.stderr)
    print(f"capture: {capture} ({size / 2**20:,.1f} MiB, {packets if packets is not None else '?'} packets; {cached})", file=sys.stderr)

    load_before = load()
    if load_before > 0.5:
        print(f"warning: load average is {load_before:.2f}: other processes compete for the CPU and the times will be worse", file=sys.stderr)
    gz = gzipped(capture, args.data) if "pcapq-gzip" in tools else None
    byte_compile_pcapq()
    imported = imported_modules() if "pcapq-imports" in tools else None
    cmds = commands(str(capture), str(gz) if gz else None, imported)
    rows: dict[str, dict] = {t: {"tool": t, "command": shown(*cmds[t]), "times": [], "cpu_s": [], "peak_rss_kb": 0, "exit": []} for t in tools}
    for r in range(args.runs):
        for t in tools:
            if t == "pcapq-core":
                if r > 0:
                    continue
                argv = cmds[t][0] + [str(args.runs)]
            else:
                argv = cmds[t][0]
            wall, cpu, rss, code = measure(argv, cmds[t][1])
            row = rows[t]
            row["cpu_s"].append(cpu)
            row["exit"].append(code)
            row["peak_rss_kb"] = max(row["peak_rss_kb"], rss)
            if t == "pcapq-core" and code == 0:
                core = json.loads((OUT / "pcapq-core.json").read_text())
                row["times"] = core["times"]
                row["import_s"] = core["import_s"]
                row["process_wall_s"] = wall
                row["summary"] = core["summary"]
                row["diagnose_s"] = core["diagnose_s"]
                packets = packets if packets is not None else core["summary"]["packets"]
                shown_t = ", ".join(f"{x:.3f}" for x in core["times"])
                print(f"  {t:<14} {shown_t} s (in one process)", file=sys.stderr)
            else:
                row["times"].append(wall)
                print(f"  {t:<14} run {r + 1}/{args.runs}: {wall:8.3f} s  cpu {cpu:8.3f} s  {rss / 1024:8.1f} MiB  exit {code}", file=sys.stderr)

    base = min(rows["pcapq-text"]["times"]) if "pcapq-text" in rows and rows["pcapq-text"]["times"] else None
    for row in rows.values():
        times = row["times"]
        row["best_s"] = min(times) if times else None
        row["median_s"] = statistics.median(times) if times else None
        row["packets_per_s"] = packets / row["best_s"] if packets and row["best_s"] and row["tool"] not in ("pcapq-startup", "pcapq-imports", "pcapq-fixed", "python-startup") else None
        row["vs_pcapq"] = row["best_s"] / base if base and row["best_s"] else None
        row["peak_rss_mib"] = row["peak_rss_kb"] / 1024
        row["best_cpu_s"] = min(row["cpu_s"]) if row["cpu_s"] and row["tool"] != "pcapq-core" else None

    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": "memory" if args.memory else "speed",
        "machine": machine(),
        "versions": {
            "pcapq": version(pcapq_command() + ["--version"]),
            "tshark": version(["tshark", "--version"]) if shutil.which("tshark") else None,
            "tcptrace": version(["tcptrace", "-v"]) if shutil.which("tcptrace") else None,
        },
        "pcapq_build": git_state(),
        "load_average": {"before": load_before, "after": load()},
        "capture": {"path": str(capture), "bytes": size, "packets": packets, "page_cache": cached},
        "runs": args.runs,
        "results": list(rows.values()),
        "tshark_retransmission_frames": tshark_retransmissions() if "tshark" in rows else None,
    }
    result["targets"] = targets(rows, args.memory)
    name = args.json or OUT / ("results-memory.json" if args.memory else "results.json")
    Path(name).write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"\nwritten to {name}")
    # `pcapq analyze` exits 1 when it analysed the capture and found a problem (a finding).
    ok = lambda tool, code: code == 0 or (code == 1 and tool.startswith("pcapq-") and tool not in ("pcapq-core", "pcapq-startup", "pcapq-imports"))  # noqa: E731
    failed = [r["tool"] for r in rows.values() if not all(ok(r["tool"], c) for c in r["exit"])]
    if failed:
        print(f"non-zero exit from: {', '.join(failed)} (see {OUT / 'stderr.txt'})")
    return 1 if failed else 0


def targets(rows: dict[str, dict], memory: bool) -> dict:
    out = {}
    text = rows.get("pcapq-text")
    if text and text["packets_per_s"]:
        out["pcapq_analyze_packets_per_s"] = {"target": f">= {TARGET_PPS:,}", "measured": round(text["packets_per_s"]), "met": text["packets_per_s"] >= TARGET_PPS}
    if text and "tshark" in rows and rows["tshark"]["vs_pcapq"]:
        r = rows["tshark"]["vs_pcapq"]
        out["tshark_time_over_pcapq"] = {"target": f">= {TARGET_VS_TSHARK}", "measured": round(r, 1), "met": r >= TARGET_VS_TSHARK}
    core = rows.get("pcapq-core")
    if core and core["packets_per_s"]:
        out["core_packets_per_s"] = {"target": f">= {TARGET_CORE_PPS:,}", "measured": round(core["packets_per_s"]), "met": core["packets_per_s"] >= TARGET_CORE_PPS}
    fixed = rows.get("pcapq-fixed")
    if fixed and fixed["best_s"]:
        out["analyze_fixed_cost_s"] = {"target": f"<= {TARGET_FIXED_S}", "measured": round(fixed["best_s"], 3), "met": fixed["best_s"] <= TARGET_FIXED_S}
    imports = rows.get("pcapq-imports")
    if imports and imports["best_s"]:
        out["startup_and_imports_s"] = {"target": f"<= {TARGET_IMPORTS_S}", "measured": round(imports["best_s"], 3), "met": imports["best_s"] <= TARGET_IMPORTS_S}
    if text and text["best_s"] and core and core.get("diagnose_s"):
        share = min(core["diagnose_s"]) / text["best_s"]
        out["diagnose_share_of_analyze"] = {"target": f"<= {TARGET_DIAGNOSE_SHARE}", "measured": round(share, 3), "met": share <= TARGET_DIAGNOSE_SHARE}
    annotate = rows.get("pcapq-annotate")
    if text and annotate and annotate["best_s"] and text["best_s"]:
        r = annotate["best_s"] / text["best_s"]
        out["annotate_time_over_analyze"] = {"target": f"<= {TARGET_ANNOTATE_RATIO}", "measured": round(r, 2), "met": r <= TARGET_ANNOTATE_RATIO}
    gz = rows.get("pcapq-gzip")
    if text and gz and gz["best_s"] and text["best_s"]:
        r = gz["best_s"] / text["best_s"]
        out["gzip_time_over_plain"] = {"target": f"<= {TARGET_GZIP_RATIO}", "measured": round(r, 2), "met": r <= TARGET_GZIP_RATIO}
    if memory:
        for t in ("pcapq-text", "pcapq-html", "pcapq-json"):
            if t in rows:
                mib = rows[t]["peak_rss_mib"]
                out[f"{t}_peak_rss_mib"] = {"target": f"< {TARGET_RSS_MIB}", "measured": round(mib, 1), "met": mib < TARGET_RSS_MIB}
    return out


def print_table(result: dict) -> None:
    cap = result["capture"]
    m = result["machine"]
    print(f"\n{cap['path']}: {cap['bytes'] / 2**20:,.1f} MiB, {cap['packets']:,} packets ({cap['page_cache']})")
    b, la = result["pcapq_build"], result["load_average"]
    print(f"{m['cpu']}, {m['cpus']} CPUs, {m['memory_mib']:,} MiB; load average {la['before']:.2f} before, {la['after']:.2f} after")
    print(f"pcapq from {b['package']} at {b['commit']}{' with uncommitted changes' if b['dirty'] else ''}, _core built {b['core_built']}")
    print(f"best and median of {result['runs']} runs\n")
    head = ["tool", "best s", "median s", "cpu s", "packets/s", "x pcapq", "peak RSS MiB"]
    lines = []
    for r in result["results"]:
        lines.append([
            r["tool"],
            f"{r['best_s']:.3f}" if r["best_s"] is not None else "-",
            f"{r['median_s']:.3f}" if r["median_s"] is not None else "-",
            f"{r['best_cpu_s']:.3f}" if r["best_cpu_s"] is not None else "-",
            f"{r['packets_per_s'] / 1e6:,.2f} M" if r["packets_per_s"] else "-",
            f"{r['vs_pcapq']:,.2f}" if r["vs_pcapq"] else "-",
            f"{r['peak_rss_mib']:,.1f}",
        ])
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for l in lines:
        print(fmt(l))
    print("\ncommands (FILE is the capture):")
    for r in result["results"]:
        print(f"  {r['tool']:<14} {r['command'].replace(cap['path'], 'FILE')}")
    if result.get("tshark_retransmission_frames") is not None:
        print(f"\ntshark counted {result['tshark_retransmission_frames']:,} tcp.analysis.retransmission frames")
    core = next((r for r in result["results"] if r["tool"] == "pcapq-core" and "summary" in r), None)
    if core:
        s = core["summary"]
        print(f"pcapq: {s['connections']:,} connections, {s['with_syn_retransmits']:,} with SYN retransmits, "
              f"{s['with_synack_retransmits']:,} with SYN-ACK retransmits, {s['with_data_retransmits']:,} with data retransmits, {s['reset']:,} reset")
    if result["targets"]:
        print("\ntargets:")
        for name, t in result["targets"].items():
            print(f"  {name:<30} {t['target']:>14}  measured {t['measured']:>14,}  {'met' if t['met'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", nargs="?", help="capture to time (default: bench/out/nginx-php-N.pcap, generated if missing)")
    ap.add_argument("--packets", type=int, help="packets in the generated capture (default 1,000,000; 5,000,000 with --memory)")
    ap.add_argument("--seed", type=int, default=1, help="seed for a generated capture (default 1)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each tool; the best counts (default 3)")
    ap.add_argument("--skip", default="", help=f"comma-separated tools not to run: {', '.join(TOOLS)}, or pcapq for all pcapq rows")
    ap.add_argument("--memory", action="store_true", help="pcapq only, on a 5M-packet capture: peak RSS against the 200 MiB target")
    ap.add_argument("--json", type=Path, help="where to write the results (default bench/out/results.json)")
    ap.add_argument("--data", type=Path, default=OUT, help="where generated captures (and the gzip copy) live (default bench/out)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

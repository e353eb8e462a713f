"""Times the stages of `pcapq annotate` in one process: the analysis with every record and its
events, the diagnosis, then `write_annotated` (labelling and copying, side by side) to
/dev/null, without comments (`ids=[]`: the copy alone) and with every connection's, and to a
real file.

    python bench/annotate_stages.py [CAPTURE] [--runs N] [--output FILE]
"""

from __future__ import annotations

import argparse
import os
import time

from pcapq import _core
from pcapq import annotate as labels
from pcapq.diagnose import diagnose

HERE = os.path.dirname(os.path.abspath(__file__))


def best(runs: int, step) -> tuple[float, object]:
    """The shortest of `runs` calls of `step`, in seconds, and the last call's result."""
    times = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = step()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("capture", nargs="?", default=os.path.join(HERE, "out", "nginx-php-1000000.pcap"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", default=os.path.join(HERE, "out", "annotated-stages.pcapng"))
    args = parser.parse_args()
    files = [args.capture]

    analyzed, result = best(args.runs, lambda: _core.analyze(files, keep_connections=True, keep_events=True))
    diagnosed, diagnosis = best(args.runs, lambda: diagnose(result))
    section = labels.section_comment(files, diagnosis.findings, diagnosis.minor_observations, "every connection")
    names = labels.finding_names(diagnosis.findings + diagnosis.minor_observations)
    copied, _ = best(args.runs, lambda: result.write_annotated(files, "/dev/null", [], names, section))
    to_null, written = best(args.runs, lambda: result.write_annotated(files, "/dev/null", None, names, section))
    to_file, _ = best(args.runs, lambda: result.write_annotated(files, args.output, None, names, section))
    os.remove(args.output)

    print(f"{args.capture}: {written['packets']:,} packets, {written['commented']:,} commented, best of {args.runs}")
    for name, seconds in [
        ("analyze (every record, events)", analyzed),
        ("diagnose", diagnosed),
        ("write_annotated, no comments, /dev/null", copied),
        ("write_annotated, /dev/null", to_null),
        ("write_annotated, a file", to_file),
    ]:
        print(f"  {name:42} {seconds:6.3f} s")


if __name__ == "__main__":
    main()

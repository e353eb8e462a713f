"""Runs many `pcapq` command lines in one process and prints what each gave.

Reads a JSON object {key: [arg, ...]} on standard input; writes {key: [exit code, sha256 of
stdout]} on standard output. tests/test_determinism.py starts it once per hash seed: each process
pays for the interpreter and the imports once, not once per command line.
"""

from __future__ import annotations

import hashlib
import json
import sys

from inprocess import run_main


def main() -> None:
    wanted: dict[str, list[str]] = json.load(sys.stdin)
    gave = {}
    for key, args in wanted.items():
        code, out, _err = run_main(*args)
        gave[key] = [code, hashlib.sha256(out.encode()).hexdigest()]
    sys.__stdout__.write(json.dumps(gave))


if __name__ == "__main__":
    main()

"""`pcapq crosscheck` once its options are read: pcapq's labels against tshark's, frame by frame."""

from __future__ import annotations

import sys
from typing import TextIO

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import console_for, deliver, fail, refuse_overwriting_inputs

TSHARK_INSTALL = "apt-get install tshark (Debian/Ubuntu)"


def run(file: str, fmt: str, output: str, method: str, no_color: bool) -> None:
    """Runs tshark on `file`, lines its analysis up with pcapq's, writes the agreement."""
    from pcapq import crosscheck as xc

    refuse_overwriting_inputs((file,), output)
    try:
        result = xc.crosscheck(file, method)
    except xc.TsharkMissing:
        fail(f"tshark is not installed; install it with: {TSHARK_INSTALL}", ExitCode.TSHARK_MISSING)
    except xc.TsharkFailed as e:
        fail(f"tshark could not analyse {file}: {e}", ExitCode.TSHARK_MISSING)
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)
    if result.tcp_segments == 0:
        fail(f"no TCP segments to compare in {file}", ExitCode.NO_TCP)

    def write(out: TextIO, colourless: bool) -> None:
        from pcapq.crosscheck import report

        if fmt == "json":
            import json

            out.write(json.dumps(result.to_json(), indent=2) + "\n")
        elif fmt == "markdown":
            out.write(report.render_markdown(result))
        elif fmt == "html":
            out.write(report.render_html(result))
        else:
            console_for(out, colourless).print(report.render(result))
        out.flush()

    deliver(output, no_color, write)
    if result.comparison.unexplained:
        sys.exit(int(ExitCode.DISAGREE))

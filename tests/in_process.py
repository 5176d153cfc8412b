"""The command line run in the test's own process: `main(argv)` from the repository's root, its
exit code and what it printed, as a subprocess's result would hold them.

For tests of what a verb computes (a simulated change, a plan): the same code as the command a
user runs, without starting an interpreter and importing the cloud SDKs again for each call.
The tests of the command line itself (one JSON document on stdout, exit codes as users see
them, nothing a native library prints to the file descriptor) run it as a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from mig_inference.cli import main

ROOT = Path(__file__).resolve().parent.parent


def mig(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m mig ARGV`, run by `main` here (a usage error's exit code included)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    return subprocess.CompletedProcess(["python", "-m", "mig", *argv], code, out.getvalue(),
                                       err.getvalue())  # fmt: skip

"""Side-by-side cost benchmarks whose cells each run in a child process.

A script measures (size, mode) cells; running each in its own process makes its peak
resident memory its own. The script re-runs itself with ``--cell SIZE MODE --repeats R``
and prints the cell's JSON as its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any


def sizes(
    ap: argparse.ArgumentParser, option: str, text: str, minimum: int, what: str
) -> list[int]:
    """Comma-separated integers of ``option``, each >= ``minimum``; else ``ap.error``
    (``what`` says what they must be, e.g. "lengths of at least 128 tokens")."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ap.error(f"{option} needs comma-separated integers, got {text!r}")
    if not out or min(out) < minimum:
        ap.error(f"{option} needs {what}, got {text!r}")
    return out


def run_cell(script: str, size: int, mode: str, repeats: int) -> dict[str, Any]:
    """One cell of ``script`` in a child process: the JSON it printed last."""
    cmd = [sys.executable, script, "--cell", str(size), mode, "--repeats", str(repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])

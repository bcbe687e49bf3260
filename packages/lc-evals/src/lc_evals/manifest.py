"""Run manifests: what ran, on what, with which versions, when.

:func:`lc_evals.run` writes ``<stem>.manifest.json`` beside every results file
``<stem>.jsonl``. Each invocation (a first run, every resume) appends one entry to
``runs``; the entry is written when the run starts (``status: "running"``) and
completed when it stops (``"completed"`` or ``"failed: <error>"``)::

    {"format": "lc-evals-manifest/1", "results": "results.jsonl", "runs": [{
        "started": "2026-12-02T10:00:00+00:00", "finished": ..., "status": "completed",
        "system": <declared identity>, "run_hash": ..., "settings": {template,
        chat_options, scorer, executor, workers}, "suite": {"hash", "items", "tasks"},
        "reused": 0, "evaluated": 24, "environment": {"lc_evals", "python",
        "platform", "libraries": {...}, "machine": {"cpu", "cores"}}}]}
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from lc_evals.fingerprint import suite_fingerprint
from lc_evals.types import TaskItem

MANIFEST_FORMAT = "lc-evals-manifest/1"
LIBRARIES = (
    "numpy",
    "typer",
    "rich",
    "httpx",
    "matplotlib",
    "tokenizers",
    "ray",
    "torch",
    "transformers",
)


def manifest_path(results_path: str | Path) -> Path:
    """``results.jsonl`` -> ``results.manifest.json`` (same folder)."""
    p = Path(results_path)
    return p.with_name(p.stem + ".manifest.json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, Any]:
    """lc-evals, Python and library versions, the platform and the CPU.

    Examples:
        >>> env = environment()
        >>> sorted(env)
        ['lc_evals', 'libraries', 'machine', 'platform', 'python']
    """
    return {
        "lc_evals": _version("lc-evals"),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "platform": platform.platform(),
        "libraries": {name: v for name in LIBRARIES if (v := _version(name)) is not None},
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
        },
    }


def read_manifest(results_path: str | Path) -> dict[str, Any]:
    """The manifest beside ``results_path``; ``FileNotFoundError`` if none was written."""
    p = manifest_path(results_path)
    if not p.exists():
        raise FileNotFoundError(f"no run manifest beside {results_path} (expected {p})")
    data: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    os.replace(tmp, path)


@dataclass
class RunManifest:
    """One entry of a manifest, kept up to date while a run goes on."""

    path: Path
    data: dict[str, Any]
    entry: dict[str, Any]

    @classmethod
    def start(
        cls,
        results_path: Path,
        *,
        system: Any,
        run_hash: str,
        settings: dict[str, Any],
        items: Sequence[TaskItem],
        reused: int,
    ) -> RunManifest:
        """Append a ``running`` entry to the manifest beside ``results_path``."""
        path = manifest_path(results_path)
        data: dict[str, Any] = {"format": MANIFEST_FORMAT, "results": results_path.name, "runs": []}
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(old, dict) and isinstance(old.get("runs"), list):
                    data = old
            except json.JSONDecodeError:
                pass  # a manifest torn by a crash: start it again, the results are intact
        entry = {
            "started": _now(),
            "finished": None,
            "status": "running",
            "system": system,
            "run_hash": run_hash,
            "settings": settings,
            "suite": {
                "hash": suite_fingerprint(items),
                "items": len(items),
                "tasks": dict(sorted(Counter(item.task for item in items).items())),
            },
            "reused": reused,
            "evaluated": 0,
            "environment": environment(),
        }
        data["runs"].append(entry)
        _write(path, data)
        return cls(path, data, entry)

    def finish(self, *, status: str, evaluated: int) -> None:
        """Record the end time, the outcome and how many items were evaluated."""
        self.entry.update(finished=_now(), status=status, evaluated=evaluated)
        _write(self.path, self.data)

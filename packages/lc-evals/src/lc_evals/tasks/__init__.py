"""Built-in task generators and their registration."""

from __future__ import annotations

from lc_evals.registry import register_task


def register_builtin_tasks() -> None:
    """Register every built-in task (called once, lazily, by the registry)."""
    from lc_evals.tasks import niah

    builtins = [
        ("niah_single", niah.niah_single, "contains_all", "RULER NIAH, one needle"),
        (
            "niah_multikey",
            niah.niah_multikey,
            "contains_all",
            "RULER NIAH, target among distractor keys",
        ),
        (
            "niah_multivalue",
            niah.niah_multivalue,
            "contains_all",
            "RULER NIAH, several values for one key",
        ),
        (
            "niah_multiquery",
            niah.niah_multiquery,
            "contains_all",
            "RULER NIAH, several keys asked at once",
        ),
    ]
    for name, fn, scorer, description in builtins:
        register_task(name, fn, scorer=scorer, description=description, replace=True)

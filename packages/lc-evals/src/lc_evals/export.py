"""Export results in the layout of lm-evaluation-harness, so runs compare with its numbers.

lm-evaluation-harness reports RULER as the task group ``ruler`` whose tasks score one
metric per context length: ``results[<task>]["4096,none"]`` is the mean score of the
items of length 4,096 (a fraction in ``[0, 1]``), with ``"4096_stderr,none"`` beside it,
and one ``samples_<task>_<date>.jsonl`` per task holds each item's document
(``input``, ``outputs``, ``max_length``, ``gen_prefix``: RULER's answer prefix), the
reply (``resps``, ``filtered_resps``) and its score under the length's metric name.

:func:`export_lm_eval` writes the same files from a results file of
:func:`lc_evals.run`. Items of a RULER configuration get lm-eval's task name
(:func:`lm_eval_task_name`: ``niah_single`` over the repeated filler with number values
is ``niah_single_1``, ``variable_tracking`` is ``ruler_vt`` ...); other tasks keep their
own name (lm-eval's ``ruler_qa_squad`` and ``ruler_qa_hotpot`` have no counterpart here:
the ``qa_1``/``qa_2`` stand-ins of :mod:`lc_evals.ruler_configs` keep their names).
A sample's ``doc`` holds no ``input`` (results do not keep the prompt) but keeps the
item's answer prefix as ``gen_prefix`` when it has one. Scores are lc-evals' scores:
``contains_all`` matches whole words where lm-eval matches substrings, so a reply that
runs an answer into another word scores lower here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lc_evals.report import interval
from lc_evals.results import Result
from lc_evals.ruler_configs import RULER_CONFIGS, ruler_config_of

RULER_GROUP = "ruler"


def lm_eval_task_name(result: Result) -> str:
    """lm-eval's name of the RULER configuration ``result`` belongs to, else its task.

    Stand-ins (``qa_1``, ``qa_2`` built from ``distractor_qa``) keep their own names.

    Examples:
        >>> r = Result("x", "niah_single", "", 1.0, "contains_all", ("1",),
        ...            metadata={"haystack": "repeat", "value_kind": "number"})
        >>> lm_eval_task_name(r)
        'niah_single_1'
    """
    config = ruler_config_of(result.task, result.metadata)
    return config.lm_eval_name if config is not None else result.task


def _is_ruler(name: str) -> bool:
    return any(c.lm_eval_name == name and not c.stand_in for c in RULER_CONFIGS.values())


def export_lm_eval(
    results: Sequence[Result],
    out_dir: str | Path,
    *,
    model: Any = None,
    manifest: dict[str, Any] | None = None,
    date: datetime | None = None,
) -> list[Path]:
    """Write ``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` under ``out_dir``.

    Args:
        results: results of one run (one system).
        out_dir: folder to write to (created).
        model: the system's identity, recorded as ``config.model``.
        manifest: the run manifest (:func:`lc_evals.read_manifest`), kept under
            ``lc_evals.manifest``.
        date: time stamp of the file names (default: now, UTC).

    Returns:
        the files written, the results JSON first.

    Raises:
        ValueError: no results, or a result without ``metadata["target_length"]``.
    """
    if not results:
        raise ValueError("no results to export")
    stamp = (date or datetime.now(UTC)).strftime("%Y-%m-%dT%H-%M-%S.%f")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by_task: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        if "target_length" not in r.metadata:
            raise ValueError(f"result {r.id!r} has no metadata['target_length'] to name its metric")
        by_task[lm_eval_task_name(r)].append(r)
    table: dict[str, dict[str, Any]] = {}
    configs: dict[str, Any] = {}
    written: list[Path] = []
    for name in sorted(by_task):
        rows = by_task[name]
        lengths = sorted({int(r.metadata["target_length"]) for r in rows})
        entry: dict[str, Any] = {"alias": name}
        for length in lengths:
            stats = interval([r.score for r in rows if int(r.metadata["target_length"]) == length])
            entry[f"{length},none"] = stats["score"]
            entry[f"{length}_stderr,none"] = stats["se"] if stats["se"] != float("inf") else "N/A"
        table[name] = entry
        configs[name] = {
            "task": name,
            "tag": [RULER_GROUP] if _is_ruler(name) else [],
            "output_type": "generate_until",
            "metric_list": [
                {"metric": str(length), "aggregation": "mean", "higher_is_better": True}
                for length in lengths
            ],
            "lc_evals_task": sorted({r.task for r in rows}),
            "scorer": sorted({r.scorer for r in rows}),
        }
        samples = out / f"samples_{name}_{stamp}.jsonl"
        with samples.open("w", encoding="utf-8") as fh:
            for doc_id, r in enumerate(rows):
                length = int(r.metadata["target_length"])
                record = {
                    "doc_id": doc_id,
                    "doc": {
                        "id": r.id,
                        "outputs": list(r.answers),
                        "max_length": length,
                        "length": r.metadata.get("length"),
                        "length_unit": r.metadata.get("length_unit"),
                        **(
                            {"gen_prefix": r.metadata["answer_prefix"]}
                            if "answer_prefix" in r.metadata
                            else {}
                        ),
                    },
                    "target": r.answers[0] if len(r.answers) == 1 else list(r.answers),
                    "resps": [[r.prediction]],
                    "filtered_resps": [r.prediction],
                    "filter": "none",
                    "metrics": [str(length)],
                    "doc_hash": r.item_hash,
                    str(length): r.score,
                }
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        written.append(samples)
    ruler = [name for name in table if _is_ruler(name)]
    groups: dict[str, Any] = {}
    if ruler:
        group: dict[str, Any] = {"alias": RULER_GROUP}
        metrics = sorted(
            {k for n in ruler for k in table[n] if k.endswith(",none") and "_stderr" not in k},
            key=lambda k: int(k.split(",")[0]),
        )
        for metric in metrics:
            vals = [table[n][metric] for n in ruler if metric in table[n]]
            group[metric] = sum(vals) / len(vals)  # unweighted, as lm-eval's group
        groups[RULER_GROUP] = group
    document = {
        "results": {**groups, **table},
        "groups": groups,
        "group_subtasks": {RULER_GROUP: ruler} if ruler else {},
        "configs": configs,
        "versions": {name: 1.0 for name in table},
        "n-shot": {name: 0 for name in table},
        "higher_is_better": {
            name: {m["metric"]: True for m in configs[name]["metric_list"]} for name in table
        },
        "n-samples": {
            name: {"original": len(v), "effective": len(v)} for name, v in by_task.items()
        },
        "config": {"model": model, "model_args": None},
        "date": stamp,
        "lc_evals": {"manifest": manifest},
    }
    path = out / f"results_{stamp}.json"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    return [path, *written]

"""RULER's 13 task configurations as lc-evals tasks and options.

RULER (Hsieh et al., 2024) evaluates 13 configurations; lm-evaluation-harness ships
them as the task group ``ruler``. :data:`RULER_CONFIGS` maps each configuration's name
to the lc-evals task and options that build the same structure (haystack kind, key and
value kinds, number of keys, values and queries). :func:`ruler_suite` generates them.

``qa_1`` and ``qa_2`` are RULER's question answering over SQuAD and HotpotQA passages.
No installable package ships those data sets for offline use, so they stand in as
``distractor_qa`` (the gold passage among planted near-miss passages) with one and
with three distractors; their entries say ``stand_in=True`` and the export keeps their
lc-evals names, so they are never mistaken for lm-eval's ``ruler_qa_*`` numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_evals.registry import generate
from lc_evals.types import TaskItem, Tokenizer


@dataclass(frozen=True)
class RulerConfig:
    """One RULER configuration: its name, lm-eval's task name, the task and options."""

    name: str
    lm_eval_name: str
    task: str
    options: dict[str, Any] = field(default_factory=dict)
    stand_in: bool = False


RULER_CONFIGS: dict[str, RulerConfig] = {
    c.name: c
    for c in (
        RulerConfig(
            "niah_single_1",
            "niah_single_1",
            "niah_single",
            {"haystack": "repeat", "value_kind": "number"},
        ),
        RulerConfig(
            "niah_single_2",
            "niah_single_2",
            "niah_single",
            {"haystack": "essay", "value_kind": "number"},
        ),
        RulerConfig(
            "niah_single_3",
            "niah_single_3",
            "niah_single",
            {"haystack": "essay", "value_kind": "uuid"},
        ),
        RulerConfig(
            "niah_multikey_1",
            "niah_multikey_1",
            "niah_multikey",
            {"haystack": "essay", "value_kind": "number", "num_distractors": 3},
        ),
        RulerConfig(
            "niah_multikey_2",
            "niah_multikey_2",
            "niah_multikey",
            {"haystack": "needles", "value_kind": "number", "num_distractors": 0},
        ),
        RulerConfig(
            "niah_multikey_3",
            "niah_multikey_3",
            "niah_multikey",
            {"haystack": "needles", "value_kind": "uuid", "key_kind": "uuid", "num_distractors": 0},
        ),
        RulerConfig(
            "niah_multivalue",
            "niah_multivalue",
            "niah_multivalue",
            {"haystack": "essay", "value_kind": "number", "num_values": 4},
        ),
        RulerConfig(
            "niah_multiquery",
            "niah_multiquery",
            "niah_multiquery",
            {"haystack": "essay", "value_kind": "number", "num_queries": 4},
        ),
        RulerConfig("vt", "ruler_vt", "variable_tracking", {"num_chains": 1, "num_hops": 4}),
        RulerConfig("cwe", "ruler_cwe", "common_words", {}),
        RulerConfig("fwe", "ruler_fwe", "frequent_words", {"alpha": 2.0}),
        RulerConfig("qa_1", "qa_1", "distractor_qa", {"distractors": 1}, stand_in=True),
        RulerConfig("qa_2", "qa_2", "distractor_qa", {"distractors": 3}, stand_in=True),
    )
}


def ruler_config_of(task: str, metadata: dict[str, Any]) -> RulerConfig | None:
    """The RULER configuration an item of ``task`` with ``metadata`` belongs to, if any.

    Examples:
        >>> ruler_config_of("niah_multikey", {"haystack": "needles", "value_kind": "uuid",
        ...                                   "key_kind": "uuid"}).name
        'niah_multikey_3'
    """
    for config in RULER_CONFIGS.values():
        if config.task != task or config.stand_in:
            continue
        if all(
            metadata.get(k, "word" if k == "key_kind" else None) == v
            for k, v in config.options.items()
            if k in ("haystack", "value_kind", "key_kind")
        ):
            return config
    return None


def ruler_suite(
    lengths: Sequence[int],
    *,
    n: int,
    seed: int,
    configs: Sequence[str] | None = None,
    tokenizer: Tokenizer | Any | None = None,
) -> list[TaskItem]:
    """``n`` items of every RULER configuration at every length.

    Ids are ``"<config>/L<length>/<index>"`` and ``metadata["ruler_config"]`` names the
    configuration.
    """
    names = list(configs) if configs is not None else list(RULER_CONFIGS)
    unknown = sorted(set(names) - set(RULER_CONFIGS))
    if unknown:
        raise ValueError(f"unknown RULER configuration(s) {unknown}; valid: {list(RULER_CONFIGS)}")
    items: list[TaskItem] = []
    for name in names:
        config = RULER_CONFIGS[name]
        for length in lengths:
            for item in generate(
                config.task, n=n, length=length, seed=seed, tokenizer=tokenizer, **config.options
            ):
                meta = {**item.metadata, "ruler_config": name}
                items.append(
                    dataclasses.replace(
                        item, id=f"{name}/L{length}/{meta.get('index', 0)}", metadata=meta
                    )
                )
    return items

"""RULER's 13 task configurations as lc-evals tasks and options.

RULER (Hsieh et al., 2024) evaluates 13 configurations; lm-evaluation-harness ships
them as the task group ``ruler``. :data:`RULER_CONFIGS` maps each configuration's name
to the lc-evals task and options that build the same structure (haystack kind, key and
value kinds, number of keys, values and queries). :func:`ruler_suite` generates them.

By default the items are worded as RULER words them (its instruction, question and
answer prefix, see :data:`~lc_evals.prompts.RULER_TEMPLATES`; VT and CWE led by RULER's
one-shot example) and the target length counts the whole prompt plus the tokens RULER
keeps for the answer, as RULER's own length does.

``qa_1`` and ``qa_2`` are RULER's question answering over SQuAD and HotpotQA passages.
No installable package ships those data sets for offline use, so they stand in as
``distractor_qa`` (the gold passage among planted near-miss passages) with one and
with three distractors, in RULER's QA prompt; their entries say ``stand_in=True`` and
the export keeps their lc-evals names, so they are never mistaken for lm-eval's
``ruler_qa_*`` numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_evals.prompts import RULER_TEMPLATES
from lc_evals.registry import generate
from lc_evals.tasks._common import LENGTH_COUNTS, TEMPLATES, check_choice
from lc_evals.types import TaskItem, Tokenizer


@dataclass(frozen=True)
class RulerConfig:
    """One RULER configuration: its name, lm-eval's task name, the task and options.

    ``ruler_task`` names RULER's template (a key of
    :data:`~lc_evals.prompts.RULER_TEMPLATES`).
    """

    name: str
    lm_eval_name: str
    task: str
    options: dict[str, Any] = field(default_factory=dict)
    stand_in: bool = False
    ruler_task: str = "niah"

    @property
    def tokens_to_generate(self) -> int:
        """The tokens RULER keeps free for the answer within the length."""
        return RULER_TEMPLATES[self.ruler_task].tokens_to_generate


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
        RulerConfig(
            "vt",
            "ruler_vt",
            "variable_tracking",
            {"num_chains": 1, "num_hops": 4},
            ruler_task="variable_tracking",
        ),
        RulerConfig(
            "cwe",
            "ruler_cwe",
            "common_words",
            {"num_common": 10},
            ruler_task="common_words_extraction",
        ),
        RulerConfig(
            "fwe", "ruler_fwe", "frequent_words", {"alpha": 2.0}, ruler_task="freq_words_extraction"
        ),
        RulerConfig(
            "qa_1", "qa_1", "distractor_qa", {"distractors": 1}, stand_in=True, ruler_task="qa"
        ),
        RulerConfig(
            "qa_2", "qa_2", "distractor_qa", {"distractors": 3}, stand_in=True, ruler_task="qa"
        ),
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
    template: str = "ruler",
    length_counts: str = "prompt",
    reserve: int | None = None,
) -> list[TaskItem]:
    """``n`` items of every RULER configuration at every length.

    Args:
        lengths: target lengths in tokens of ``tokenizer`` (characters without one).
        n: items per configuration and length.
        seed: explicit seed (>= 0).
        configs: names of :data:`RULER_CONFIGS` (default: all 13).
        tokenizer: anything with ``encode(text)``.
        template: ``"ruler"`` (RULER's wording and one-shot examples) or ``"plain"``
            (lc-evals' question after the context).
        length_counts: ``"prompt"``: the rendered prompt
            (:func:`~lc_evals.render_prompt`) plus ``reserve`` fits the length, as in
            RULER; ``"context"``: the context alone does.
        reserve: units kept free for the answer when the prompt is counted; ``None``:
            RULER's ``tokens_to_generate`` of the configuration (128 NIAH, 30 VT, 120
            CWE, 50 FWE, 32 QA).

    Ids are ``"<config>/L<length>/<index>"`` and ``metadata["ruler_config"]`` names the
    configuration.

    Examples:
        >>> (item,) = ruler_suite([1500], n=1, seed=0, configs=["niah_single_1"])
        >>> from lc_evals.prompts import render_prompt
        >>> render_prompt(item).startswith("A special magic number is hidden")
        True
        >>> len(render_prompt(item)) + 128 <= 1500
        True
    """
    names = list(configs) if configs is not None else list(RULER_CONFIGS)
    unknown = sorted(set(names) - set(RULER_CONFIGS))
    if unknown:
        raise ValueError(f"unknown RULER configuration(s) {unknown}; valid: {list(RULER_CONFIGS)}")
    check_choice("template", template, TEMPLATES)
    check_choice("length_counts", length_counts, LENGTH_COUNTS)
    if reserve is not None and length_counts != "prompt":
        raise ValueError(f"reserve={reserve} needs length_counts='prompt'")
    items: list[TaskItem] = []
    for name in names:
        config = RULER_CONFIGS[name]
        options = dict(config.options, template=template, length_counts=length_counts)
        if length_counts == "prompt":
            options["reserve"] = config.tokens_to_generate if reserve is None else reserve
        for length in lengths:
            for item in generate(
                config.task, n=n, length=length, seed=seed, tokenizer=tokenizer, **options
            ):
                meta = {**item.metadata, "ruler_config": name}
                items.append(
                    dataclasses.replace(
                        item, id=f"{name}/L{length}/{meta.get('index', 0)}", metadata=meta
                    )
                )
    return items

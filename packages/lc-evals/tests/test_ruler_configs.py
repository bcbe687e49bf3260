"""RULER's 13 configurations, niah_multikey_3's UUID keys, and their lm-eval names."""

from __future__ import annotations

import re

import lc_evals

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def test_thirteen_configs_generate_and_name_themselves() -> None:
    assert len(lc_evals.RULER_CONFIGS) == 13
    suite = lc_evals.ruler_suite([2000], n=1, seed=0)
    assert len(suite) == 13
    names = {i.metadata["ruler_config"] for i in suite}
    assert names == set(lc_evals.RULER_CONFIGS)
    stand_ins = {n for n, c in lc_evals.RULER_CONFIGS.items() if c.stand_in}
    assert stand_ins == {"qa_1", "qa_2"}
    for item in suite:
        r = lc_evals.Result(item.id, item.task, "", 0.0, "x", item.answers, metadata=item.metadata)
        config = lc_evals.RULER_CONFIGS[item.metadata["ruler_config"]]
        assert lc_evals.lm_eval_task_name(r) == (
            item.task if config.stand_in else config.lm_eval_name
        )


def test_niah_multikey_3_has_uuid_keys_and_values_among_uuid_needles() -> None:
    (item,) = lc_evals.ruler_suite([2000], n=1, seed=3, configs=["niah_multikey_3"])
    (key,) = item.metadata["keys"]
    (value,) = item.answers
    assert re.fullmatch(UUID, key)
    assert re.fullmatch(UUID, value)
    assert key in item.question
    # RULER's needle format: "One of the special magic uuids for <uuid> is: <uuid>."
    needles = re.findall(
        rf"One of the special magic uuids for ({UUID}) is: ({UUID})\.", item.context
    )
    assert len(needles) > 10  # the haystack is made of such needles
    assert needles.count((key, value)) == 1
    assert sum(k == key for k, _ in needles) == 1  # the asked key appears once
    assert item.context.count(value) == 1

"""The Ray executor on a local Ray instance (Ray is the optional extra ``ray``)."""

from __future__ import annotations

import json

import pytest

import lc_evals

ray = pytest.importorskip("ray", reason="Ray is the optional extra lc-evals[ray]")


class Boom(RuntimeError):
    pass


def answer_or_boom(item: lc_evals.TaskItem) -> str:
    if item.metadata["index"] == 2:
        raise Boom(item.id)
    return item.answers[0]


@pytest.mark.slow  # starting a local Ray instance takes 5-40 s depending on machine load
def test_ray_executor_resumes_like_the_local_one(tmp_path) -> None:
    items = lc_evals.generate("niah_single", n=4, length=800, seed=1)
    ex = lc_evals.RayExecutor(num_cpus=2, max_in_flight=1)
    try:
        path = tmp_path / "r.jsonl"
        with pytest.raises(Exception, match="niah_single-1-2"):
            lc_evals.run(answer_or_boom, items, path, executor=ex, system_id="oracle")
        first = [json.loads(x)["id"] for x in path.read_text().splitlines()]
        assert first == ["niah_single-1-0", "niah_single-1-1"]
        results = lc_evals.run(
            lambda item: item.answers[0], items, path, executor=ex, system_id="oracle"
        )
        assert [r.score for r in results] == [1.0] * 4
        ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
        assert sorted(ids) == sorted(i.id for i in items)
    finally:
        ray.shutdown()

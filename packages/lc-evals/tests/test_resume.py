"""Resume keys results by what produced them; a torn last line never blocks a run."""

from __future__ import annotations

import json

import pytest

import lc_evals
from lc_evals import StaleResultsError, run


def _suite(seed: int) -> list[lc_evals.TaskItem]:
    return lc_evals.make_suite(["niah_single"], [300], n=3, seed=seed, haystack="repeat")


def oracle(item: lc_evals.TaskItem) -> str:
    return item.answers[0]


def silent(item: lc_evals.TaskItem) -> str:
    return ""


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_results_of_another_seed_are_refused_not_reused(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    run(oracle, _suite(0), path)
    other = _suite(1)
    assert [i.id for i in other] == [i.id for i in _suite(0)]  # same ids, other items
    with pytest.raises(StaleResultsError, match=r"3 result\(s\).*item") as err:
        run(oracle, other, path)
    assert err.value.path == str(path)
    assert len(_lines(path)) == 3  # nothing written or dropped


def test_results_of_another_system_are_refused_or_rerun_on_request(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    items = _suite(0)
    assert [r.score for r in run(oracle, items, path)] == [1.0] * 3
    with pytest.raises(StaleResultsError, match="system"):
        run(silent, items, path)
    results = run(silent, items, path, on_mismatch="rerun")
    assert [r.score for r in results] == [0.0] * 3
    assert sorted(r["id"] for r in _lines(path)) == sorted(i.id for i in items)
    stale = tmp_path / "r.stale.jsonl"
    assert [r["score"] for r in _lines(stale)] == [1.0] * 3  # kept aside, not lost
    # the same system again reuses everything
    assert run(silent, items, path) == results


def test_chat_options_and_declared_identity_are_part_of_the_key(tmp_path) -> None:
    class Model:
        def __init__(self, name: str) -> None:
            self.name = name

        def identity(self) -> dict:
            return {"model": self.name}

        def chat(self, messages, **options):
            return "?"

    items = _suite(0)
    path = tmp_path / "r.jsonl"
    run(Model("a"), items, path, max_tokens=16)
    assert len(run(Model("a"), items, path, max_tokens=16)) == 3  # same: reused
    with pytest.raises(StaleResultsError):
        run(Model("a"), items, path, max_tokens=32)
    with pytest.raises(StaleResultsError):
        run(Model("b"), items, path, max_tokens=16)
    with pytest.raises(StaleResultsError):
        run(Model("a"), items, path, max_tokens=16, scorer="exact_match")


def test_results_without_a_fingerprint_are_not_trusted(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    items = _suite(0)
    run(oracle, items, path)
    rows = _lines(path)
    for row in rows:
        del row["fingerprint"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(StaleResultsError, match="no fingerprint"):
        run(oracle, items, path)


def test_a_torn_last_line_is_dropped_with_a_warning_and_the_run_goes_on(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    items = _suite(0)
    run(oracle, items[:2], path)
    whole = path.read_text()
    torn = json.dumps(_lines(path)[0])[:37]
    path.write_text(whole + torn)  # a kill in the middle of writing the third line
    with pytest.warns(lc_evals.ResultsFileWarning, match="line 3"):
        results = run(oracle, items, path)
    assert [r.score for r in results] == [1.0] * 3
    assert sorted(r["id"] for r in _lines(path)) == sorted(i.id for i in items)
    # a complete last line that only lacks its newline is kept, and the next line
    # starts on a line of its own
    kept = path.read_text().splitlines()[:2]
    path.write_text("\n".join(kept))
    assert [r.score for r in run(oracle, items, path)] == [1.0] * 3
    assert len(_lines(path)) == 3


def test_make_suite_ids_are_unique_or_refused() -> None:
    with pytest.raises(ValueError, match=r"lengths.*500"):
        lc_evals.make_suite(["niah_single"], [500, 500], n=1, seed=0)
    with pytest.raises(ValueError, match="tasks"):
        lc_evals.make_suite(["niah_single", "niah_single"], [500], n=1, seed=0)
    suite = lc_evals.make_suite(
        ["niah_single"], [300], n=1, seed=0, depths=[0.1234567, 0.1234568], haystack="repeat"
    )
    assert len({i.id for i in suite}) == 2


def test_negative_seeds_are_refused_by_every_task() -> None:
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        lc_evals.generate("niah_single", n=1, length=300, seed=-1)


def test_two_lambdas_are_two_systems(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    items = _suite(0)
    run(lambda item: item.answers[0], items, path)
    assert len(run(lambda item: item.answers[0], items, path)) == 3  # same code: reused
    with pytest.raises(StaleResultsError, match="system"):
        run(lambda item: "", items, path)

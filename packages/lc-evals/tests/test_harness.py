"""The harness: resume after a crash, executors, chat models, results files, reports."""

from __future__ import annotations

import json
import threading

import pytest

import lc_evals
from lc_evals import ResultsFileError, run


@pytest.fixture(scope="module")
def items() -> list[lc_evals.TaskItem]:
    return lc_evals.make_suite(
        ["niah_single", "kv_retrieval"], [600, 1200], n=2, seed=0, depths=[0.0, 0.5, 1.0]
    )


def oracle(item: lc_evals.TaskItem) -> str:
    return f"The answer is {item.answers[0]}."


class Crash(RuntimeError):
    pass


class CrashAfter:
    """An oracle that raises on its (limit+1)-th call: a run killed midway."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, item: lc_evals.TaskItem) -> str:
        with self.lock:
            self.calls += 1
            if self.calls > self.limit:
                raise Crash(f"killed after {self.limit} items")
        return oracle(item)


def _ids(path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("workers", [1, 3])
def test_interrupted_run_resumes_each_item_exactly_once(tmp_path, items, workers) -> None:
    path = tmp_path / "results.jsonl"
    with pytest.raises(Crash):
        run(CrashAfter(7), items, path, workers=workers, system_id="oracle")
    first = _ids(path)
    assert len(first) == 7  # every call that finished before the crash was recorded
    calls = []

    def counting(item):
        calls.append(item.id)
        return oracle(item)

    # another callable: it declares the oracle's identity, or its results are refused
    results = run(counting, items, path, workers=workers, system_id="oracle")
    assert sorted(calls) == sorted(
        set(i.id for i in items) - set(first)
    )  # finished items not redone
    ids = _ids(path)
    assert sorted(ids) == sorted(i.id for i in items)  # each item exactly once
    assert [r.id for r in results] == [i.id for i in items]
    assert all(r.score == 1.0 for r in results)
    # a third run has nothing to do
    assert run(CrashAfter(0), items, path, system_id="oracle") == results


def test_chat_model_receives_context_and_question(items) -> None:
    seen = []

    class Model:
        def chat(self, messages, **options):
            seen.append((messages, options))
            return "I do not know"

    results = run(Model(), items[:2], max_tokens=16)
    assert all(r.score == 0.0 for r in results)
    (message,) = seen[0][0]
    assert message["role"] == "user"
    assert message["content"] == items[0].context + "\n\n" + items[0].question
    assert seen[0][1] == {"max_tokens": 16}


def test_results_carry_scores_metadata_and_latency(tmp_path, items) -> None:
    results = run(oracle, items, tmp_path / "r.jsonl", scorer="exact_match")
    assert all(r.scorer == "exact_match" and r.score == 1.0 for r in results)
    assert results[0].metadata["target_length"] == 600
    assert all(r.latency_s >= 0 for r in results)
    assert lc_evals.load_results(tmp_path / "r.jsonl") == sorted(
        results, key=lambda r: _ids(tmp_path / "r.jsonl").index(r.id)
    )


def test_corrupt_line_is_reported_with_its_number(tmp_path, items) -> None:
    path = tmp_path / "r.jsonl"
    run(oracle, items[:3], path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:40]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsFileError, match="line 2") as err:
        run(oracle, items, path)
    assert err.value.line == 2
    path.write_text("\n".join([lines[0], lines[0], lines[2]]) + "\n")
    with pytest.raises(ResultsFileError, match=r"line 2: duplicate result .* \(first at line 1\)"):
        lc_evals.load_results(path)
    path.write_text(lines[0] + "\n" + '{"id": "x", "task": "t", "prediction": "p"}\n')
    with pytest.raises(ResultsFileError, match=r"line 2: result is missing field\(s\) \['score'\]"):
        lc_evals.load_results(path)


def test_bad_systems_and_suites(items) -> None:
    with pytest.raises(ValueError, match="unique"):
        run(oracle, [items[0], items[0]])
    with pytest.raises(TypeError, match="ChatModel"):
        run(42, items[:1])
    with pytest.raises(TypeError, match="expected str"):
        run(lambda item: 7, items[:1])
    with pytest.raises(ValueError, match="executor must be one of"):
        run(oracle, items[:1], executor="dask")
    custom = lc_evals.TaskItem("c-0-0", "my_custom_task", "ctx", "q?", ("yes",))
    with pytest.raises(ValueError, match="not registered, so it has no default scorer"):
        run(lambda item: "yes", [custom])
    assert run(lambda item: "yes", [custom], scorer="exact_match")[0].score == 1.0
    tagged = lc_evals.TaskItem(
        "c-0-1", "my_custom_task", "ctx", "q?", ("yes",), {"scorer": "contains_any"}
    )
    assert run(lambda item: "Yes.", [tagged])[0].scorer == "contains_any"


def test_thread_executor_runs_in_parallel(items) -> None:
    barrier = threading.Barrier(3, timeout=10)

    def waits_for_peers(item):
        barrier.wait()  # deadlocks (times out) unless 3 items run at once
        return oracle(item)

    results = run(waits_for_peers, items[:3], workers=3)
    assert [r.score for r in results] == [1.0, 1.0, 1.0]


def test_suite_round_trip(tmp_path, items) -> None:
    path = lc_evals.write_suite(items, tmp_path / "suite.jsonl")
    assert lc_evals.load_suite(path) == items
    assert len({i.id for i in items}) == len(items) == 2 * 2 * 3 * 2


def test_summary_table_and_plots(tmp_path, items) -> None:
    def half(item):  # right only for needles in the first half
        return item.answers[0] if item.metadata["depth"] <= 0.5 else "no idea"

    results = run(half, items)
    rows = lc_evals.summarize(results, by=("task", "depth"))
    assert [(r["depth"], r["score"]) for r in rows if r["task"] == "niah_single"] == [
        (0.0, 1.0),
        (0.5, 1.0),
        (1.0, 0.0),
    ]
    table = lc_evals.format_table(rows)
    assert "| task | depth | n | score |" in table
    assert "| niah_single | 1.0 | 4 | 0.0 |" in table
    from lc_evals.report import heatmap_grid

    lengths, depths, grid = heatmap_grid(results, task="niah_single")
    assert lengths == [600, 1200]
    assert depths == [0.0, 0.5, 1.0]
    assert grid == [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
    for fn, name in [
        (lc_evals.plot_niah_heatmap, "h.png"),
        (lc_evals.plot_accuracy_vs_length, "a.png"),
    ]:
        out = fn(results, tmp_path / name)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no results with a depth"):
        lc_evals.plot_niah_heatmap(results, tmp_path / "x.png", task="nope")

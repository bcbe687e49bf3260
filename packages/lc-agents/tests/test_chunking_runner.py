"""Chunk-and-aggregate: real concurrency, per-worker results, and the aggregators."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lc_agents.chunking import (
    ChunkAndAggregate,
    ChunkingConfig,
    MajorityVote,
    ManagerAggregator,
    chunk_and_aggregate,
    majority_vote,
)

SLEEP = 0.2


class SleepyFinder:
    """A worker that takes SLEEP seconds and answers the value of key=<digits> if it sees one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        with self.lock:
            self.in_flight += 1
            self.calls += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(SLEEP)
        with self.lock:
            self.in_flight -= 1
        match = re.search(r"key=(\d+)", messages[0]["content"])
        return match.group(1) if match else "none"


class AsyncFinder(SleepyFinder):
    async def achat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.in_flight += 1
        self.calls += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(SLEEP)
        self.in_flight -= 1
        match = re.search(r"key=(\d+)", messages[0]["content"])
        return match.group(1) if match else "none"

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        raise AssertionError("chat must not be used when achat exists")


DOC = "." * 700 + " key=4417 " + "." * 90  # 800 characters: 8 chunks of 100


def test_workers_run_concurrently() -> None:
    model = SleepyFinder()
    system = ChunkAndAggregate(model, ChunkingConfig(chunk_size=100, aggregation="vote"))
    start = time.perf_counter()
    result = system.run(DOC, "What is the key?")
    wall = time.perf_counter() - start
    assert result.n_workers == 8
    assert model.calls == 8
    assert model.max_in_flight == 8
    assert wall < 3 * SLEEP < 8 * SLEEP  # serial would take 1.6 s
    assert result.answer == "4417"
    assert result.worker_seconds <= result.seconds


def test_concurrency_is_bounded() -> None:
    model = SleepyFinder()
    config = ChunkingConfig(chunk_size=100, aggregation="vote", max_concurrency=2)
    start = time.perf_counter()
    ChunkAndAggregate(model, config).run(DOC, "What is the key?")
    wall = time.perf_counter() - start
    assert model.max_in_flight == 2
    assert wall >= 4 * SLEEP * 0.95  # 8 calls, two at a time


def test_async_models_use_achat() -> None:
    model = AsyncFinder()
    result = chunk_and_aggregate(model, DOC, "key?", chunk_size=100, aggregation="vote")
    assert model.max_in_flight == 8
    assert result.answer == "4417"


def test_per_worker_results_are_kept_in_order() -> None:
    model = SleepyFinder()
    seen: list[int] = []
    system = ChunkAndAggregate(
        model, ChunkingConfig(chunk_size=100, overlap=10, aggregation="vote")
    )
    result = system.run(
        DOC, "What is the key?", on_worker_done=lambda w: seen.append(w.chunk.index)
    )
    assert [w.chunk.index for w in result.workers] == list(range(result.n_workers))
    assert sorted(seen) == list(range(result.n_workers))
    for w in result.workers:
        assert w.chunk.text in w.prompt
        assert "What is the key?" in w.prompt
        assert w.answer == ("4417" if "key=4417" in w.chunk.text else "none")
        assert w.seconds >= SLEEP * 0.9
    # the needle sits in exactly the chunks whose text holds it
    assert sum(w.answer == "4417" for w in result.workers) >= 1


class RecordingManager:
    def __init__(self, reply: str = "4417") -> None:
        self.prompts: list[str] = []
        self.reply = reply

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.prompts.append(messages[0]["content"])
        return self.reply


def test_manager_sees_every_reply_in_order() -> None:
    manager = RecordingManager()
    system = ChunkAndAggregate(
        SleepyFinder(), ChunkingConfig(chunk_size=100), manager_model=manager
    )
    result = system.run(DOC, "What is the key?")
    assert result.answer == "4417"
    (prompt,) = manager.prompts
    assert "What is the key?" in prompt
    replies = re.findall(r"#(\d+): (\S+)", prompt)
    assert [int(i) for i, _ in replies] == list(range(1, 9))
    assert [r for _, r in replies] == [w.answer for w in result.workers]


def test_single_chunk_skips_the_manager() -> None:
    manager = RecordingManager("wrong")
    system = ChunkAndAggregate(
        SleepyFinder(), ChunkingConfig(chunk_size=10_000), manager_model=manager
    )
    assert system.run(DOC, "key?").answer == "4417"
    assert manager.prompts == []


def test_custom_aggregator_receives_answers() -> None:
    got: list[list[str]] = []

    def last_non_none(question: str, answers: list[str]) -> str:
        got.append(list(answers))
        return [a for a in answers if a != "none"][-1]

    result = ChunkAndAggregate(
        SleepyFinder(), ChunkingConfig(n_workers=4), aggregator=last_non_none
    ).run(DOC, "key?")
    assert result.answer == "4417"
    assert got == [[w.answer for w in result.workers]]


def test_run_inside_an_event_loop_asks_for_arun() -> None:
    system = ChunkAndAggregate(SleepyFinder(), ChunkingConfig(n_workers=2, aggregation="vote"))

    async def main() -> str:
        with pytest.raises(RuntimeError, match="arun"):
            system.run(DOC, "key?")
        return (await system.arun(DOC, "key?")).answer

    assert asyncio.run(main()) == "4417"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "exactly one"),
        ({"chunk_size": 10, "n_workers": 2}, "exactly one"),
        ({"chunk_size": 10, "overlap": 10}, "chunk_size=10"),
        ({"n_workers": 0}, "n_workers=0"),
        ({"n_workers": 2, "max_concurrency": 0}, "max_concurrency=0"),
        ({"n_workers": 2, "aggregation": "mean"}, "aggregation='mean'"),
        ({"n_workers": 2, "worker_template": "no placeholder"}, "worker_template"),
        ({"n_workers": 2, "manager_template": "no placeholder"}, "manager_template"),
    ],
)
def test_config_validation_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        ChunkingConfig(**kwargs)


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(TypeError, match="chat"):
        ChunkAndAggregate(object(), ChunkingConfig(n_workers=2))
    system = ChunkAndAggregate(SleepyFinder(), ChunkingConfig(n_workers=2, aggregation="vote"))
    with pytest.raises(ValueError, match="question"):
        system.run(DOC, "  ")
    with pytest.raises(ValueError, match="empty"):
        system.run("", "key?")
    with pytest.raises(ValueError, match="responses"):
        ManagerAggregator(RecordingManager(), template="no placeholder")


# --- majority vote --------------------------------------------------------------------


def test_majority_vote_counts_normalised_answers_and_ignores_abstentions() -> None:
    assert majority_vote(["none", "Paris.", "paris", "Rome", "N/A", "NONE"]) == "Paris."
    assert majority_vote(["none", "", "n/a"]) == "none"
    assert majority_vote(["none"], no_answer="?") == "?"
    assert MajorityVote(abstentions=())("q", ["none", "none", "7"]) == "none"


@given(st.permutations(["a", "b", "c", "a", "b", "c", "none", "d"]))
def test_majority_vote_ties_go_to_the_first_answer(answers: list[str]) -> None:
    # a, b and c tie with two votes each: the one that appears first wins, every time
    expected = next(a for a in answers if a in {"a", "b", "c"})
    assert majority_vote(answers) == expected
    assert all(majority_vote(answers) == expected for _ in range(3))


def test_majority_vote_matches_a_brute_force_count() -> None:
    for answers in itertools.product(["x", "y", "none"], repeat=5):
        voters = [a for a in answers if a != "none"]
        if not voters:
            assert majority_vote(answers) == "none"
            continue
        top = max(voters.count(v) for v in set(voters))
        expected = next(v for v in voters if voters.count(v) == top)
        assert majority_vote(answers) == expected


class BatchFinder(SleepyFinder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def chat_batch(self, conversations: list[list[dict[str, str]]], **options: Any) -> list[str]:
        self.batches.append(len(conversations))
        return [SleepyFinder.chat(self, m, **options) for m in conversations]


def test_batches_go_through_chat_batch() -> None:
    model = BatchFinder()
    config = ChunkingConfig(chunk_size=100, aggregation="vote", batch_size=3, max_concurrency=8)
    start = time.perf_counter()
    result = ChunkAndAggregate(model, config).run(DOC, "key?")
    wall = time.perf_counter() - start
    assert sorted(model.batches) == [2, 3, 3]
    assert result.answer == "4417"
    assert [w.chunk.index for w in result.workers] == list(range(8))
    assert model.max_in_flight == 3  # the three batches ran side by side
    assert wall < 6 * SLEEP  # serial would take 8 * SLEEP
    with pytest.raises(TypeError, match="chat_batch"):
        ChunkAndAggregate(SleepyFinder(), config).run(DOC, "key?")
    with pytest.raises(ValueError, match="batch_size=0"):
        ChunkingConfig(n_workers=2, batch_size=0)

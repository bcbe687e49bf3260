"""The ACE routing benchmark's task generator, retention measure, scorer and resume.

No real model runs here: the scorer is checked on the tiny randomly initialised Llama
of ``conftest.py``, and the resume test drives the benchmark with a scripted engine
(:class:`ScriptedEngine`, a stand-in that copies rules from its prompts).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from lc_agents.ace import PlaybookStore, deduplicate, salient_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _load import load_script  # the scripts' folder, on the path above

bench = load_script("ace_routing")


def _mask(text: str) -> str:
    for tok in sorted(salient_tokens(text), key=len, reverse=True):
        text = text.replace(tok, "#")
    return text


def test_task_is_deterministic_per_seed() -> None:
    a, b = bench.make_routing_task(3), bench.make_routing_task(3)
    assert a == b
    c = bench.make_routing_task(4)
    assert [r.text() for r in a.rules] != [r.text() for r in c.rules]


def test_rules_differ_only_in_numbers_and_identifiers() -> None:
    task = bench.make_routing_task(0, n_products=12, n_train=100)
    assert len(task.rules) == 24
    assert len(set(task.queues)) == 24
    for side in ("under", "over"):
        texts = {_mask(r.text()) for r in task.rules if r.side == side}
        assert len(texts) == 1, texts  # one wording per side once numbers/ids are masked
    for r, s in itertools.combinations(task.rules, 2):
        assert salient_tokens(r.text()) != salient_tokens(s.text())
        if r.product == s.product:  # the two rules of a product share its code and threshold
            assert r.threshold == s.threshold
            assert r.side != s.side


def test_dedup_keeps_every_rule_even_when_all_embeddings_coincide() -> None:
    class Same:  # an embedder calling every pair of bullets a near-duplicate
        name, dim = "same", 4

        def embed_texts(self, texts: list[str]) -> np.ndarray:
            return np.full((len(texts), 4), 0.5, dtype=np.float32)

    task = bench.make_routing_task(1)
    store = PlaybookStore()
    from lc_agents.ace import Delta

    store.apply([Delta.add("routing", r.text()) for r in task.rules])
    assert deduplicate(store, Same(), threshold=0.9) == []
    assert all(bench.retained(store.render(), task.rules))


@pytest.mark.parametrize(("products", "n_train", "n_test"), [(12, 100, 200), (8, 32, 80)])
def test_late_test_items_need_rules_seen_early(products: int, n_train: int, n_test: int) -> None:
    task = bench.make_routing_task(
        2, n_products=products, n_train=n_train, n_test=n_test, early_share=0.75
    )
    half = n_train // 2
    last = task.last_seen()
    early = [t for t in task.test if t.group == "early"]
    assert len(early) == n_test * 3 // 4
    assert len(task.test) == n_test
    assert len(task.train) == n_train
    for t in early:
        assert last[t.rule] < half  # not seen in the second half of the stream
    train_pairs = {(t.product, t.amount) for t in task.train}
    for t in task.train + task.test:
        rule = task.rules[t.rule]
        assert rule.applies(t.product, t.amount)
        assert t.answer == rule.queue
        assert sum(r.applies(t.product, t.amount) for r in task.rules) == 1
        assert str(t.amount) in t.text
        assert t.product in t.text
    assert not {(t.product, t.amount) for t in task.test} & train_pairs
    # every rule is taught at least once, early rules only in the first half
    assert set(last) == set(range(len(task.rules)))
    assert all(t.group == "early" for t in task.train[:half])
    assert all(t.group == "late" for t in task.train[half:])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_products": 3}, "n_products"),
        ({"n_train": 5}, "n_train"),
        ({"early_share": 2}, "early_share"),
    ],
)
def test_task_rejects_bad_sizes(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        bench.make_routing_task(0, **kwargs)


def test_retention_needs_product_threshold_and_queue_on_one_line() -> None:
    rule = bench.Rule("KD-37", 120, "under", "R4", "early")
    assert bench.retained("- KD-37 refunds below $120 -> R4", [rule]) == [True]
    assert bench.retained("- KD-37 refunds below $1200 -> R4", [rule]) == [False]
    assert bench.retained("- KD-37 under $120\n- go to R4", [rule]) == [False]
    assert bench.retained("- KD-371 under $120 go to R4.", [rule]) == [False]
    assert bench.retained("- KD-37 under $120 go to R41", [rule]) == [False]


def test_retention_needs_the_queue_on_the_rules_side_of_the_threshold() -> None:
    under = bench.Rule("KD-37", 120, "under", "R4", "early")
    over = bench.Rule("KD-37", 120, "over", "M7", "early")
    assert bench.retained(under.text() + "\n" + over.text(), [under, over]) == [True, True]
    # the wrong side keeps neither rule although code, threshold and queue are there
    swapped = "Refund requests for KD-37 of $120 or more go to queue R4."
    assert bench.retained(swapped, [under, over]) == [False, False]
    assert bench.retained("- KD-37 refunds $120 -> R4", [under]) == [False]  # no side
    both = "KD-37: under $120 go to R4; of $120 or more go to M7"
    assert bench.retained(both, [under, over]) == [True, True]
    crossed = "KD-37: under $120 go to M7; of $120 or more go to R4"
    assert bench.retained(crossed, [under, over]) == [False, False]
    assert bench.retained("R4 <- KD-37 below $120", [under]) == [True]  # side after the queue
    assert bench.retained("KD-37 at least $120: M7", [over]) == [True]
    assert bench.retained("KD-37 >= 120 dollars: M7", [over]) == [True]


def test_sign_test() -> None:
    assert bench.sign_test(0, 0) == 1.0
    assert bench.sign_test(5, 5) == 1.0
    assert bench.sign_test(10, 0) == pytest.approx(2 / 1024)
    assert bench.sign_test(8, 2) == pytest.approx(2 * 56 / 1024)


def test_wilson_interval() -> None:
    lo, hi = bench.wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3)
    assert hi == pytest.approx(0.5962, abs=1e-3)
    assert bench.wilson(0, 0) == (0.0, 1.0)


def test_cached_candidate_scores_match_full_forward(tiny_model_dir: Path) -> None:
    """On the tiny random-init Llama: prefix-cached, batched scores == plain forwards."""
    import torch

    engine = bench.LocalEngine(tiny_model_dir)
    cands = ["K2", "K7", "T1", "W93"]
    memory = "- the refund rules are listed here\n- another note"

    def full(ticket: str) -> list[float]:
        ids = engine.prompt_ids(memory, ticket)
        out = []
        for c in cands:
            cid = engine.tokenizer.encode(" " + c, add_special_tokens=False)
            x = torch.tensor([ids + cid])
            with torch.inference_mode():
                lp = engine.model(input_ids=x).logits[0].float().log_softmax(-1)
            out.append(float(sum(lp[len(ids) - 1 + k, t] for k, t in enumerate(cid))))
        return out

    for ticket in ("refund of $12 for AB-10", "refund of $99 for AB-11", "refund of $99 for AB-11"):
        got = engine.scores(memory, ticket, cands)
        np.testing.assert_allclose(got, full(ticket), atol=1e-4)


class ScriptedEngine:
    """A stand-in engine: answers from rule lines it finds in the notes and, as curator
    or rewriter, copies the rule stated in its prompt. ``fail_after`` simulates a crash."""

    RULE = re.compile(
        r"Refund requests for (\S+) (under|of) \$(\d+)(?: or more)? go to queue (\w+)"
    )

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after
        self.generated_tokens = 0

    def _tick(self) -> None:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("simulated crash")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def scores(self, memory: str, ticket: str, candidates: list[str]) -> list[float]:
        self._tick()
        product = re.search(r"[A-Z]{2}-\d\d", ticket)
        amount = re.search(r"\$(\d+)", ticket)
        assert product
        assert amount
        best = candidates[0]
        for m in self.RULE.finditer(memory):
            p, side, t, q = m.groups()
            if p == product.group(0):
                under = int(amount.group(1)) < int(t)
                if under == (side == "under"):
                    best = q
        return [1.0 if c == best else 0.0 for c in candidates]

    def chat(self, messages: list[dict[str, str]], **options: object) -> str:
        self._tick()
        user = messages[-1]["content"]
        latest = user.split("Lessons:" if options.get("role") == "curator" else "Feedback:")[-1]
        rule = self.RULE.search(latest)
        assert rule is not None
        if options.get("role") == "curator":
            op = {"op": "ADD", "section": "routing", "content": rule.group(0) + "."}
            return json.dumps({"operations": [op]})
        old = user.split("Current cheatsheet:\n")[1].split("\n\nLatest ticket")[0]
        lines = [ln for ln in old.splitlines() if ln.startswith("-")]
        return "\n".join([*lines, f"- {rule.group(0)}."][-3:])  # bounded: 3 lines


class Flat:
    """An embedder that makes no two different bullets near-duplicates."""

    name, dim = "flat", 64

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t) % 64] = 1.0
        return out


def _strip(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    drop = {"seconds", "predict_seconds", "state"}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def test_resume_after_a_crash_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    task = bench.make_routing_task(0, n_products=2, n_train=8, n_test=6)
    settings = bench.Settings(n_products=2, n_train=8, n_test=6)
    conds = ["base", "ace", "rewrite", "oracle"]

    def run(engine: ScriptedEngine, records: bench.Records) -> None:
        bench.run(engine, task, conds, records, settings, embedder=Flat(), log=lambda _: None)

    whole = bench.Records(tmp_path / "whole.jsonl")
    run(ScriptedEngine(), whole)

    path = tmp_path / "cut.jsonl"
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(ScriptedEngine(fail_after=17), bench.Records(path))
    done = len(path.read_text().splitlines())
    assert 0 < done < len(whole.rows)
    resumed_engine = ScriptedEngine()
    run(resumed_engine, bench.Records(path))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    keys = [bench.Records.key(r) for r in lines]
    assert len(keys) == len(set(keys)) == len(whole.rows)  # nothing redone, nothing missing
    again = bench.Records(path)
    for phase, c in [("test", c) for c in conds] + [("train", "ace"), ("train", "rewrite")]:
        assert _strip(again.select(phase, c, 0)) == _strip(whole.select(phase, c, 0))
    # a finished run does no work when started again
    idle = ScriptedEngine(fail_after=0)
    run(idle, bench.Records(path))
    assert idle.calls == 0


def test_summary_reports_accuracy_retention_and_costs(tmp_path: Path) -> None:
    task = bench.make_routing_task(0, n_products=2, n_train=8, n_test=6)
    settings = bench.Settings(n_products=2, n_train=8, n_test=6, retention_every=2)
    records = bench.Records(tmp_path / "r.jsonl")
    bench.run(
        ScriptedEngine(),
        task,
        bench.CONDITIONS,
        records,
        settings,
        embedder=Flat(),
        log=lambda _: None,
    )
    summary = bench.write_summary([task], records, settings, tmp_path)
    acc = summary["accuracy"]
    assert acc["oracle"]["all"]["accuracy"] == 1.0  # the scripted answerer reads rules exactly
    assert acc["ace"]["all"]["accuracy"] == 1.0  # the playbook kept all four rules
    ace, rw = summary["learned"]["ace"], summary["learned"]["rewrite"]
    assert [p["step"] for p in ace["retention"]] == [2, 4, 6, 8]
    assert ace["retention"][-1]["retained_all"] == 1.0
    assert rw["retention"][-1]["retained_all"] <= 0.75  # three lines cannot hold four rules
    assert (tmp_path / "ace_routing.png").stat().st_size > 0
    assert json.loads((tmp_path / "ace_routing.json").read_text())["chance"] == 0.25


def test_several_seeds_are_pooled_ticket_by_ticket(tmp_path: Path) -> None:
    settings = bench.Settings(n_products=2, n_train=8, n_test=6, retention_every=2)
    tasks = [bench.make_routing_task(s, n_products=2, n_train=8, n_test=6) for s in (0, 1)]
    records = bench.Records(tmp_path / "r.jsonl")
    for task in tasks:
        run_settings = bench.replace(settings, seed=task.seed)
        conds = ["base", "ace", "rewrite"]
        bench.run(ScriptedEngine(), task, conds, records, run_settings, embedder=Flat(), log=print)
    pooled = bench.write_summary(tasks, records, settings, tmp_path, name="two")
    per = [bench.summarise(t, records, bench.replace(settings, seed=t.seed)) for t in tasks]
    assert pooled["seeds"] == [0, 1]
    for c in ("base", "ace", "rewrite"):
        got = pooled["accuracy"][c]["all"]
        assert got["n"] == 12
        assert got["correct"] == sum(p["accuracy"][c]["all"]["correct"] for p in per)
        assert got["per_seed"] == [p["accuracy"][c]["all"]["accuracy"] for p in per]
    pair = pooled["paired"]["ace vs base"]
    assert pair["only_first_right"] == sum(
        p["paired"]["ace vs base"]["only_first_right"] for p in per
    )
    last = pooled["learned"]["rewrite"]["retention"][-1]
    assert last["retained_all"] == pytest.approx(
        sum(p["learned"]["rewrite"]["retention"][-1]["retained_all"] for p in per) / 2
    )
    assert set(json.loads((tmp_path / "two.json").read_text())["per_seed"]) == {"0", "1"}
    assert (tmp_path / "two.png").stat().st_size > 0


def test_paired_with_another_run_counts_tickets_both_answered(tmp_path: Path) -> None:
    mine, other = (bench.Records(tmp_path / f"{n}_records.jsonl") for n in ("a", "b"))
    outcomes_a = [True, True, False, False, True]
    outcomes_b = [True, False, True, False]  # the other run stopped one ticket short
    for records, outcomes in ((mine, outcomes_a), (other, outcomes_b)):
        for i, ok in enumerate(outcomes):
            row = {"phase": "test", "condition": "ace_add", "seed": 0, "item": f"t{i}"}
            records.add(row | {"correct": ok})
    mine.add({"phase": "test", "condition": "base", "seed": 0, "item": "t0", "correct": 1})
    got = bench.paired_with(mine, other, "b", [0])
    assert set(got) == {"ace_add vs b:ace_add"}  # base was answered by one run only
    pair = got["ace_add vs b:ace_add"]
    assert pair["n"] == 4
    assert (pair["only_first_right"], pair["only_second_right"]) == (1, 1)
    assert pair["accuracy"] == pair["other_accuracy"] == 0.5
    assert pair["sign_test_p"] == 1.0

"""The LDAR look-alike-facts benchmark: item construction, near-miss rate, reader, resume.

No real model runs here: the candidate scorer is checked on the tiny randomly
initialised Llama of ``conftest.py`` against plain forwards, and the resume test drives
the records with a scripted reader (a stand-in that counts its calls).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _load import load_script  # the scripts' folder, on the path above

bench = load_script("ldar_nearmiss")


def test_items_are_deterministic_and_distinct() -> None:
    a, b = bench.make_item("test", 3, min_tokens=300), bench.make_item("test", 3, min_tokens=300)
    assert a == b
    assert bench.make_item("test", 4, min_tokens=300) != a
    assert bench.make_item("train", 3, min_tokens=300) != a
    assert bench.make_item("test", 3, seed=1, min_tokens=300) != a


@pytest.mark.parametrize("index", range(12))
def test_item_structure(index: int) -> None:
    item = bench.make_item("train", index, min_tokens=400, near_misses=3)
    kinds = list(item.kinds)
    assert kinds.count("gold") == 1
    assert kinds.count("near_miss") == 3
    assert kinds.count("outdated") <= 1
    assert sum(len(p.split()) for p in item.passages) >= 400
    # the answer is among the candidates, the candidates are distinct 4-digit years
    assert item.answer in item.candidates
    assert len(set(item.candidates)) == len(item.candidates) == 6
    assert all(len(c) == 4 and c.isdigit() for c in item.candidates)
    gold = item.passages[item.gold_index]
    entity = item.question.split(" the ", 1)[1].split(" ")[:2]
    name = " ".join(entity).rstrip("?")
    # the gold passage names the entity and states the answer, not in the question's verb
    assert name in gold
    assert item.answer in gold
    verb = {"open": "opened", "built": "was built", "renovated": "was renovated"}
    verb |= {"close": "closed", "sold": "was sold"}
    q_verb = next(v for k, v in verb.items() if k in item.question)
    assert f"{name} {q_verb}" not in gold
    # every near miss states another year in the question's wording, about a look-alike
    for i in item.misleading:
        p = item.passages[i]
        assert item.answer not in p
        assert q_verb in p
        if item.kinds[i] == "near_miss":
            assert f"{name} {q_verb}" not in p
            assert name.split()[0][:3] in p  # shares the name's first syllable
    # every misleading year is a candidate: a reader fooled by it answers wrong
    for i in item.misleading:
        years = [c for c in item.candidates if c in item.passages[i]]
        assert years
        assert item.answer not in years


def test_item_reaches_min_tokens_with_a_given_counter() -> None:
    item = bench.make_item("test", 0, min_tokens=2000, count_tokens=len)  # characters
    assert sum(len(p) for p in item.passages) >= 2000
    # fillers stop as soon as the budget is reached
    assert sum(len(p) for p in item.passages) < 2000 + max(len(p) for p in item.passages)


def test_make_item_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="near_misses"):
        bench.make_item("test", 0, near_misses=0)
    with pytest.raises(ValueError, match="n_candidates"):
        bench.make_item("test", 0, near_misses=3, n_candidates=4)


def test_gold_rank_counts_ties_against_the_gold() -> None:
    assert bench.gold_rank([0.2, 0.9, 0.5], 1) == 0
    assert bench.gold_rank([0.2, 0.9, 0.5], 2) == 1
    assert bench.gold_rank([0.5, 0.5, 0.1], 0) == 1


def test_near_miss_stats_known_cases() -> None:
    g, nm, out, f = "gold", "near_miss", "outdated", "filler"
    profiles = [
        ([0.9, 0.8, 0.1, 0.2], [g, nm, f, f]),  # gold first
        ([0.7, 0.8, 0.1, 0.2], [g, nm, f, f]),  # near miss first
        ([0.7, 0.1, 0.8, 0.9], [g, out, nm, f]),  # filler first, a near miss above gold
        ([0.5, 0.1, 0.2, 0.9], [g, nm, f, f]),  # filler first, no near miss above
        ([0.6, 0.6, 0.1, 0.0], [g, out, f, f]),  # tie: against the gold
    ]
    s = bench.near_miss_stats(profiles, max_rank=2)
    assert s["n"] == 5
    assert s["near_miss_above_gold"] == pytest.approx(3 / 5)
    assert s["top1_not_gold"] == pytest.approx(4 / 5)
    assert s["top1_misleading"] == pytest.approx(2 / 5)
    assert s["gold_rank_histogram"] == [1, 3, 1]
    with pytest.raises(ValueError, match="one gold"):
        bench.near_miss_stats([([0.1, 0.2], [nm, f])])


def test_near_miss_rate_of_generated_items_with_a_bag_of_words_embedder() -> None:
    """Question-worded near misses out-score the paraphrased gold under word overlap."""
    from lc_agents.ldar import similarities
    from lc_agents.retrieval import HashingEmbedder

    emb = HashingEmbedder(dim=2048)
    profiles = []
    for i in range(30):
        item = bench.make_item("test", i, min_tokens=600)
        profiles.append((similarities(emb, item.question, item.passages), item.kinds))
    s = bench.near_miss_stats(profiles)
    assert s["near_miss_above_gold"] >= 0.2


def test_action_bands() -> None:
    from lc_agents.ldar import Band

    bands = bench.action_bands(3, (1,), 3)
    assert bands == [Band(0, 1), Band(0, 2), Band(0, 3), Band(1, 2), Band(1, 3)]


def test_cached_candidate_scores_match_full_forward(tiny_model_dir: Path) -> None:
    """On the tiny random-init Llama: prefix-cached, batched scores == plain forwards."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    reader = bench.CandidateReader(model, tok)
    cands = ["1873", "1921", "7", "the 1868"]  # lengths differ in this tokenizer

    def full(question: str, passages: list[str]) -> list[float]:
        ids = reader.prompt_ids(question, passages)
        out = []
        for c in cands:
            cid = tok.encode(c, add_special_tokens=False)
            with torch.inference_mode():
                lp = model(input_ids=torch.tensor([ids + cid])).logits[0].float().log_softmax(-1)
            out.append(float(sum(lp[len(ids) - 1 + k, t] for k, t in enumerate(cid))))
        return out

    ps = ["the mill opened in 1921", "a bridge was built", "it is green"]
    for passages in (ps[:1], ps[:2], ps[:3], ps[1:2], ps[:3]):  # shared prefixes, a reset
        got = reader.scores("When?", passages, cands)
        np.testing.assert_allclose(got, full("When?", passages), rtol=1e-4, atol=1e-4)


class ScriptedReader:
    """Stand-in reader: prefers the year of the first passage; counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def scores(self, question: str, passages: list[str], candidates: list[str]) -> list[float]:
        self.calls += 1
        return [float(c in passages[0]) for c in candidates]

    def passage_tokens(self, passages: list[str]) -> int:
        return sum(len(p.split()) for p in passages)


class OverlapEmbedder:
    """Stand-in embedder: bag of words hashed to 64 dimensions."""

    name = "overlap"
    dim = 64

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % self.dim] += 1
        return out


def test_records_resume_and_summary(tmp_path: Path) -> None:
    items = {
        s: [bench.make_item(s, i, min_tokens=250) for i in range(4)] for s in ("train", "test")
    }
    bands = bench.action_bands(3, (1,), 3)
    path = tmp_path / "r_records.jsonl"
    reader, emb = ScriptedReader(), OverlapEmbedder()
    rec = bench.Records(path)
    for s in ("train", "test"):
        for it in items[s][:3]:
            bench.run_item(rec, reader, emb, s, it, bands, gold=s == "test", whole=s == "test")
    first = reader.calls
    assert first == 3 * len(bands) + 3 * (len(bands) + 2)
    # an interrupted write leaves a cut last line; a fresh process resumes past it
    with path.open("a") as fh:
        fh.write('{"split": "test", "item": "te')
    rec = bench.Records(path)
    for s in ("train", "test"):
        for it in items[s]:
            bench.run_item(rec, reader, emb, s, it, bands, gold=s == "test", whole=s == "test")
    assert reader.calls - first == len(bands) + len(bands) + 2  # only the fourth items
    # the gold condition reads the gold passage: the scripted reader is right there
    assert all(rec.get("test", it.id, "gold")["correct"] == 1.0 for it in items["test"])
    args = {"token_penalty": 0.1, "epochs": 20, "seed": 0, "candidates": 6, "machine": "test"}
    ids = {s: [it.id for it in items[s]] for s in items}
    report = bench.summarise(rec, ids["train"], ids["test"], bands, args, tmp_path, "r")
    text = (tmp_path / "r.json").read_text()
    assert "NaN" not in text
    assert "Infinity" not in text
    loaded = json.loads(text)
    assert loaded["methods"]["gold"]["accuracy"] == 1.0
    assert loaded["methods"]["ldar"]["n"] == 4
    assert set(loaded["comparisons"]) >= {
        "ldar_vs_top_k",
        "ldar_vs_band_classifier",
        "ldar_vs_whole",
        "ldar_vs_gold",
    }
    assert sum(loaded["band_classifier_choices"].values()) == 4
    cv = loaded["band_classifier_cv_train"]
    assert 0.0 <= cv["band_classifier"] <= 1.0
    assert 0.0 <= cv["fixed_band"] <= 1.0
    assert loaded["comparisons"]["ldar_vs_gold"]["method"] == "mcnemar_exact"
    assert (tmp_path / "r.png").stat().st_size > 0
    assert report["n_test"] == 4
    m = loaded["methods"]["ldar"]
    assert m["ci_low"] <= m["accuracy"] <= m["ci_high"]


def test_band_classifier_learns_when_top1_is_a_near_miss() -> None:
    """Top-1 is right when it stands out; otherwise rank 2 is: the classifier switches."""
    from lc_agents.ldar import Band, LdarExample

    bands = [Band(0, 1), Band(1, 2), Band(0, 2)]
    rng = np.random.default_rng(0)

    def example(i: int, clear: bool) -> object:
        top = 0.8 if clear else 0.52
        sims = np.sort(np.r_[top, 0.5, rng.uniform(0.1, 0.4, 6)])[::-1]
        correct = np.array([1.0, 0.0, 0.0]) if clear else np.array([0.0, 1.0, 0.0])
        return LdarExample(str(i), sims, np.arange(8), correct, np.array([50.0, 50.0, 100.0]))

    train = [example(i, i % 2 == 0) for i in range(40)]
    test = [example(100 + i, i % 3 == 0) for i in range(12)]
    chosen = bench.band_classifier(train, test, bands)
    want = {e.id: bands[0] if float(e.similarities[0]) > 0.7 else bands[1] for e in test}
    assert chosen == want
    # a band never right in training is never chosen; ties prefer fewer tokens
    assert all(b != bands[2] for b in chosen.values())
    # held out fold by fold, it stays right; the best fixed band is right half the time
    cv = bench.cross_validated(train, bands, bands[0], folds=4)
    assert cv == {"folds": 4, "band_classifier": 1.0, "fixed_band": 0.5}


def test_fit_logistic_separates_a_line() -> None:
    x = np.linspace(-2, 2, 41)[:, None]
    w, b = bench.fit_logistic(x, (x[:, 0] > 0).astype(float), l2=0.01)
    assert w[0] > 0
    assert abs(b) < 0.5


def test_shards_split_every_stage_without_overlap(tmp_path: Path) -> None:
    items = {
        s: [bench.make_item(s, i, min_tokens=250) for i in range(5)] for s in ("train", "test")
    }
    bands = bench.action_bands(2, (1,), 2)
    path = tmp_path / "r_records.jsonl"
    readers = [ScriptedReader(), ScriptedReader()]
    for k, reader in enumerate(readers):  # two "processes", each with its own Records
        bench.run_stages(
            bench.Records(path),
            reader,
            OverlapEmbedder(),
            items["train"],
            items["test"],
            bands,
            label_test=5,
            whole_items=4,
            shard=(k, 2),
        )
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    keys = [(r["split"], r["item"], r["condition"]) for r in rows]
    assert len(keys) == len(set(keys))  # nothing answered twice
    merged = bench.Records(path)
    for it in items["train"]:
        assert all(merged.get("train", it.id, str(b)) is not None for b in bands)
    for i, it in enumerate(items["test"]):
        assert merged.get("test", it.id, "gold") is not None
        assert (merged.get("test", it.id, "whole") is not None) == (i < 4)
    # shard 0 holds items 0, 2, 4; shard 1 items 1, 3: answers split 3 : 2 per stage
    per_item = len(bands)
    calls = [r.calls for r in readers]
    assert calls[0] == 3 * per_item + 3 * (per_item + 1) + 2
    assert calls[1] == 2 * per_item + 2 * (per_item + 1) + 2
    assert bench.parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "1", "a/b", "0/0", "-1/2"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_shard(bad)


def test_clean_replaces_non_finite_values() -> None:
    out = bench.json_safe({"a": float("nan"), "b": [1.0, math.inf], "c": np.float64(2.0)})
    assert out == {"a": None, "b": [1.0, None], "c": 2.0}
    json.dumps(out, allow_nan=False)


def test_records_keep_one_reader_dtype(tmp_path: Path) -> None:
    records = bench.Records(tmp_path / "r.jsonl")
    meta = tmp_path / "r_reader.json"
    bench.check_reader(meta, {"dtype": "bfloat16"}, records)  # new records: any set-up
    bench.check_reader(meta, {"dtype": "bfloat16"}, records)
    with pytest.raises(SystemExit, match="another --name"):
        bench.check_reader(meta, {"dtype": "float32"}, records)
    old = bench.Records(tmp_path / "old.jsonl")
    old.add({"split": "test", "item": "0", "condition": "whole"})
    with pytest.raises(SystemExit, match="float32"):  # records from before the file: float32
        bench.check_reader(tmp_path / "old_reader.json", {"dtype": "bfloat16"}, old)

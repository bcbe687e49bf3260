"""The ICL study script's answer log: an interrupted run resumes without redoing or losing queries."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _study():
    spec = importlib.util.spec_from_file_location("icl_study", ROOT / "benchmarks/icl_study.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["icl_study"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_model():
    """A random 2-layer Llama over the embedded SmolLM2 tokenizer (no weights needed)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lc_agents.models import load_tokenizer

    tok = load_tokenizer("smollm2-135m-instruct")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    return LlamaForCausalLM(cfg).eval(), tok


GRID = dict(
    model_name="tiny",
    tasks=["parity", "vending_machine_sum"],
    styles=["plain"],
    deltas=[0.0, 0.85],
    shot_grid=[0, 2],
    items=2,
    window=256,
    progress=False,
)


def _counts(cells):
    return [(c.task, c.delta, c.shots, c.n, c.correct, c.predictions) for c in cells]


def test_interrupted_run_resumes_each_query_once(tiny_model, tmp_path, monkeypatch):
    study = _study()
    model, tok = tiny_model
    clean, _ = study.run_study(model, tok, **GRID)

    log = tmp_path / "answers.jsonl"
    real_ask = study.Scorer.ask
    calls = {"n": 0}

    def failing_ask(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 5:
            raise RuntimeError("interrupted")
        return real_ask(self, *args, **kwargs)

    monkeypatch.setattr(study.Scorer, "ask", failing_ask)
    with pytest.raises(RuntimeError, match="interrupted"):
        study.run_study(model, tok, log_path=log, **GRID)
    monkeypatch.setattr(study.Scorer, "ask", real_ask)
    assert len(log.read_text().splitlines()) == 1 + 5  # settings line + the finished answers

    asked = {"n": 0}

    def counting_ask(self, *args, **kwargs):
        asked["n"] += 1
        return real_ask(self, *args, **kwargs)

    monkeypatch.setattr(study.Scorer, "ask", counting_ask)
    resumed, _ = study.run_study(model, tok, log_path=log, **GRID)
    rows = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    keys = [(r["style"], r["task"], r["delta"], r["shots"], r["i"]) for r in rows]
    total = sum(c.n for c in clean)
    assert len(keys) == len(set(keys)) == total
    assert asked["n"] == total - 5
    assert _counts(resumed) == _counts(clean)

    # a log serves a smaller item count too: nothing is asked again
    asked["n"] = 0
    fewer, _ = study.run_study(model, tok, log_path=log, **(GRID | {"items": 1}))
    assert asked["n"] == 0
    monkeypatch.setattr(study.Scorer, "ask", real_ask)
    clean_fewer, _ = study.run_study(model, tok, **(GRID | {"items": 1}))
    assert _counts(fewer) == _counts(clean_fewer)


def test_answer_log_errors_name_the_line(tiny_model, tmp_path):
    study = _study()
    model, tok = tiny_model
    log = tmp_path / "answers.jsonl"
    settings = {"model": "tiny", "window": 256, "seed": 0}
    log.write_text(json.dumps({"settings": settings}) + "\n{not json\n")
    with pytest.raises(SystemExit, match=r"answers.jsonl:2: malformed"):
        study.run_study(model, tok, log_path=log, **GRID)
    log.write_text(json.dumps({"settings": settings | {"window": 512}}) + "\n")
    with pytest.raises(SystemExit, match=r"answers.jsonl:1: logged with"):
        study.run_study(model, tok, log_path=log, **GRID)


def test_findings_pool_over_tasks_then_compare_styles_and_shifts():
    study = _study()
    cell = study.Cell
    cells = [
        # style a: 3/4 at 0 shots (delta 0), 1/4 at 0 shots (delta 0.5)
        cell("m", "a", "t1", 0.0, "0", 0, n=4, correct=3),
        cell("m", "a", "t1", 0.5, "0", 0, n=4, correct=1),
        # style b: 2/4 and 2/4
        cell("m", "b", "t1", 0.0, "0", 0, n=4, correct=2),
        cell("m", "b", "t1", 0.5, "0", 0, n=4, correct=2),
        # max shots: both styles 4/4 at delta 0 and 2/4 shifted
        cell("m", "a", "t1", 0.0, "max", 100, n=4, correct=4),
        cell("m", "a", "t1", 0.5, "max", 100, n=4, correct=2),
        cell("m", "b", "t1", 0.0, "max", 100, n=4, correct=4),
        cell("m", "b", "t1", 0.5, "max", 100, n=4, correct=2),
    ]
    f = study.findings(cells)["m"]
    assert f["by_style"] == {"a": {"0": 0.5, "max": 0.75}, "b": {"0": 0.5, "max": 0.75}}
    assert f["style_spread"] == {"0": 0.0, "max": 0.0}
    assert f["by_delta"] == {"0": {"0": 0.625, "max": 1.0}, "0.5": {"0": 0.375, "max": 0.5}}
    assert f["shift_gap"] == {"0": 0.25, "max": 0.5}
    assert f["n"] == {"0": 8, "max": 8}
    cells[0].correct = 4  # style a at 0 shots: 5/8
    assert study.findings(cells)["m"]["style_spread"]["0"] == 0.125

"""The length-extrapolation benchmark: learning-rate selection and the byte-level text task."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "extrapolation.py"
_spec = importlib.util.spec_from_file_location("lc_extrapolation_bench_sel", _PATH)
assert _spec is not None
assert _spec.loader is not None
E = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = E
_spec.loader.exec_module(E)

torch.set_num_threads(1)


def test_lr_labels_match_the_file_names() -> None:
    assert E.lr_label(1e-3) == "1e-3"
    assert E.lr_label(3e-4) == "3e-4"
    assert E.lr_label(2.5e-4) == "2.5e-4"
    assert E.lr_label(0.01) == "1e-2"
    args = E.parse(["--tag=run"])
    sub = E.with_lr(args, 3e-3)
    assert (sub.tag, sub.lr) == ("run_lr3e-3", 3e-3)
    assert (args.tag, args.lr) == ("run", 3e-3)  # the original is untouched


def test_choose_lr_takes_the_lowest_mean_held_out_loss() -> None:
    scores = {
        "3e-4": {"0": {"loss": 1.0}, "1": {"loss": 1.0}},
        "1e-3": {"0": {"loss": 0.2}, "1": {"loss": 1.4}},  # mean 0.8
        "3e-3": {"0": {"loss": 0.7}, "1": {"loss": 0.7}},  # mean 0.7: chosen
    }
    assert E.choose_lr(scores) == "3e-3"
    tie = {"3e-3": {"0": {"loss": 0.5}}, "3e-4": {"0": {"loss": 0.5}}}
    assert E.choose_lr(tie) == "3e-4"  # ties go to the smaller rate
    with pytest.raises(ValueError, match="no learning rate"):
        E.choose_lr({})


def test_ablations_take_the_full_models_rate() -> None:
    assert [E.selection_key(m) for m in E.METHODS] == [
        "rope",
        "alibi",
        "nope",
        "bam",
        "hsa",
        "hsa",
        "hsa",
        "hsa",
    ]


def test_text_split_is_disjoint_and_by_document() -> None:
    docs = [bytes([i]) * (i + 1) for i in range(20)]
    parts = {s: E.split_documents(docs, s) for s in ("train", "val", "test")}
    assert parts["test"] == [docs[0], docs[8], docs[16]]
    assert parts["val"] == [docs[4], docs[12]]
    assert len(parts["train"]) == 15
    assert sorted(b for p in parts.values() for b in p) == sorted(docs)
    with pytest.raises(ValueError, match="split must be"):
        E.split_documents(docs, "dev")
    real = {s: set(E.text_corpus(s)) for s in ("train", "test")}
    assert real["train"]
    assert real["test"]
    assert not real["train"] & real["test"]


def test_text_batches_predict_the_next_byte() -> None:
    stream = E.byte_stream([b"abcdefghij", b"klmnop"])
    assert bytes(stream.tolist()) == b"abcdefghij\n\nklmnop"
    x, y = E.text_batch(stream, 5, 6, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 6)
    torch.testing.assert_close(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=True):
        text = bytes(stream.tolist())
        assert bytes(row_x + row_y[-1:]) in text
    with pytest.raises(ValueError, match="shorter than"):
        E.text_batch(stream, 1, 18, torch.Generator())


class _Bigram(nn.Module):
    """Logits that depend on the current byte only: no use of context."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(256, 256, generator=torch.Generator().manual_seed(3)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table[tokens]


class _Uniform(nn.Module):
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*tokens.shape, 256)


def test_text_bits_per_byte_uniform_and_context_free() -> None:
    docs = [bytes(range(40, 120)) * 3, b"x" * 10, bytes(range(200, 250)) * 4]
    windows = E.text_windows(docs, 64, 5)
    assert len(windows) == 2  # the short document is skipped
    assert all(w.shape == (65,) for w in windows)
    b_all, b_last = E.evaluate_text(_Uniform(), windows, 32, 8, 1000)
    assert b_all == pytest.approx([8.0, 8.0])
    assert b_last == pytest.approx([8.0, 8.0])
    model = _Bigram()
    tails = [E.evaluate_text(model, windows, n, 8, 64)[1] for n in (8, 16, 64)]
    assert tails[0] == pytest.approx(tails[1], abs=1e-5)  # same bytes, context unused
    assert tails[0] == pytest.approx(tails[2], abs=1e-5)
    # by hand: the last 8 bytes of window 0 under the bigram table
    w = windows[0]
    logp = torch.log_softmax(model.table.detach()[w[-9:-1]], -1)
    want = float(-logp[torch.arange(8), w[-8:]].mean()) / math.log(2)
    assert tails[0][0] == pytest.approx(want, rel=1e-5)


def test_mean_ci_known_values() -> None:
    mu, lo, hi = E.mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mu == 2.5
    half = 1.959964 * math.sqrt(5 / 3) / 2
    assert (lo, hi) == pytest.approx((2.5 - half, 2.5 + half))
    assert E.mean_ci([7.0]) == (7.0, 7.0, 7.0)


def test_text_and_synthetic_tasks_do_not_mix() -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        E.parse(["--tasks=text,multikey"])
    args = E.parse(["--tasks=text", "--dim=16", "--layers=2"])
    assert E.build("alibi", args, 0).embed.weight.shape[0] == E.TEXT_VOCAB


def _tiny(tmp: Path) -> list[str]:
    return [
        "--seeds=0",
        "--train-len=32",
        "--min-train-len=32",
        "--steps=3",
        "--batch=2",
        "--dim=16",
        "--layers=2",
        "--window=8",
        "--mults=1,2",
        "--items=3",
        "--val-items=4",
        "--no-plot",
        f"--out={tmp / 'out'}",
        f"--ckpt-dir={tmp / 'ckpt'}",
    ]


def test_lr_grid_selects_on_held_out_data_and_resumes(tmp_path: Path) -> None:
    argv = [*_tiny(tmp_path), "--methods=nope,hsa-no-bypass", "--lr-grid=1e-3,3e-3"]
    E.main(argv)
    out = tmp_path / "out"
    sel = json.loads((out / "extrapolation_selection.json").read_text())
    assert sel["grid"] == [1e-3, 3e-3]
    assert set(sel["scores"]) == {"nope", "hsa"}  # the ablation is not selected on its own
    for key in ("nope", "hsa"):
        per = sel["scores"][key]
        assert set(per) == {"1e-3", "3e-3"}
        losses = {lab: per[lab]["0"]["loss"] for lab in per}
        assert sel["chosen"][key] == float(min(losses, key=losses.get))
        for lab in per:
            tasks = per[lab]["0"]["tasks"]
            assert {t["items"] for t in tasks.values()} == {4}
    summary = json.loads((out / "extrapolation_selected.json").read_text())
    assert summary["lr_per_method"] == {
        "nope": sel["chosen"]["nope"],
        "hsa-no-bypass": sel["chosen"]["hsa"],
    }
    assert set(summary["results"]) == {"nope", "hsa-no-bypass"}
    assert summary["results"]["nope"]["multikey"]["64"]["mult"] == 2
    ckpts = sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt"))
    assert "extrapolation_lr1e-3-hsa-seed0.pt" in ckpts
    assert "extrapolation_lr3e-3-nope-seed0.pt" in ckpts
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "ckpt").glob("*.pt")}
    recs = {
        p.name: p.read_text() for p in out.glob("*_records.jsonl")
    }  # the evaluated cells, per rate
    E.main(argv)  # a rerun loads every model and adds no record
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "ckpt").glob("*.pt")} == stamps
    assert {p.name: p.read_text() for p in out.glob("*_records.jsonl")} == recs
    assert json.loads((out / "extrapolation_selection.json").read_text()) == sel


def test_text_run_writes_bits_per_byte(tmp_path: Path) -> None:
    argv = [*_tiny(tmp_path), "--methods=nope,hsa", "--tasks=text", "--tag=txt", "--items=2"]
    E.main(argv)
    recs = E.read_records(tmp_path / "out" / "txt_records.jsonl")
    assert {(r["method"], r["length"]) for r in recs} == {
        ("nope", 32),
        ("nope", 64),
        ("hsa", 32),
        ("hsa", 64),
    }
    for r in recs:
        assert len(r["bits_all"]) == len(r["bits_last"]) == 2
        # three training steps leave a model near the uniform 8 bits per byte
        assert all(4.0 < b < 10.0 for b in r["bits_all"])
    summary = json.loads((tmp_path / "out" / "txt.json").read_text())
    cell = summary["results"]["hsa"]["64"]
    assert cell["mult"] == 2
    assert cell["windows"] == 2
    lo, hi = cell["last"]["ci95"]
    assert lo <= cell["last"]["bits_per_byte"] <= hi
    # the paired change against the training length: zero there, the mean difference here
    assert summary["results"]["hsa"]["32"]["last_minus_1x"]["bits_per_byte"] == 0.0
    by = {(r["method"], r["length"]): r["bits_last"] for r in recs}
    want = sum(a - b for a, b in zip(by[("hsa", 64)], by[("hsa", 32)], strict=True)) / 2
    assert cell["last_minus_1x"]["bits_per_byte"] == pytest.approx(want, abs=1e-4)

"""Resumable chunk-recurrent fine-tuning (``lc-train oomb-finetune``).

A tiny random Llama and a word-level tokenizer are saved to a directory, as a user's
model would be. The key property: a run interrupted after a checkpoint and resumed ends
with the same weights and the same per-step losses as an uninterrupted run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_train.cli import main
from lc_train.oomb.finetune import (
    FinetuneConfig,
    FinetuneError,
    TokenWindows,
    finetune,
    latest_checkpoint,
)

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("oomb_ft_model")
    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
    ).save_pretrained(path)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator(
        [" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["<unk>", "</s>"])
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="</s>"
    ).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("oomb_ft_data") / "docs.jsonl"
    with path.open("w") as f:
        for _ in range(4):  # about 4 * 40 tokens: 5 windows of 32, so epochs wrap
            f.write(json.dumps({"text": " ".join(rng.choices(WORDS, k=39))}) + "\n")
    return path


def _cfg(model_dir: Path, corpus: Path, out: Path, **kw) -> FinetuneConfig:
    base = dict(
        model=str(model_dir), data=str(corpus), out=str(out), seq_len=32, chunk=16, page=8,
        steps=4, batch=2, lr=3e-3, warmup=1, save_every=2,
    )  # fmt: skip
    return FinetuneConfig(**{**base, **kw})


def _trained(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("lora", [0, 2])
def test_resumed_run_equals_uninterrupted_run(
    model_dir: Path, corpus: Path, tmp_path: Path, lora: int
) -> None:
    if lora:
        pytest.importorskip("peft")
    full = finetune(_cfg(model_dir, corpus, tmp_path / "a", lora_rank=lora), progress=False)
    assert full.steps_done == 4
    assert sorted(full.losses) == [1, 2, 3, 4]

    part = finetune(
        _cfg(model_dir, corpus, tmp_path / "b", lora_rank=lora), stop_after=3, progress=False
    )
    assert part.steps_done == 3
    ckpt = latest_checkpoint(tmp_path / "b")
    assert ckpt is not None
    assert ckpt.name == "step-0000002"
    rest = finetune(
        _cfg(model_dir, corpus, tmp_path / "b", lora_rank=lora, resume=True), progress=False
    )
    assert sorted(rest.losses) == [3, 4]
    for step in (3, 4):
        assert rest.losses[step] == pytest.approx(full.losses[step], rel=1e-6, abs=1e-7)
    a, b = _trained(full.model), _trained(rest.model)
    assert a.keys() == b.keys()
    if lora:
        assert all("lora_" in n for n in a)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-6, atol=1e-7, msg=name)
    # training did something: the loss fell and the weights moved
    assert full.losses[4] < full.losses[1]
    log = [json.loads(line) for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 3, 4]  # the lost step 3 was redone


def test_cli_trains_saves_and_refuses_bad_setups(
    model_dir: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    args = ["oomb-finetune", "--model", str(model_dir), "--data", str(corpus), "--out", str(out),
            "--seq-len", "32", "--chunk", "16", "--page", "8", "--steps", "2", "--save-every", "1",
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    assert "done: step 2/2" in capsys.readouterr().out
    assert (out / "final" / "config.json").is_file()
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == [
        "step-0000001",
        "step-0000002",
    ]
    reloaded = LlamaForCausalLM.from_pretrained(out / "final")
    assert reloaded.config.num_hidden_layers == 2

    def error(argv: list[str]) -> str:
        assert main(argv) == 2
        return capsys.readouterr().err

    assert "pass --resume" in error(args)
    assert "run settings differ (lr" in error([*args, "--resume", "--lr", "0.5"])
    # sharded and replicated checkpoints hold the optimizer state in different layouts
    assert "fsdp: checkpoint False, now True" in error([*args, "--resume", "--fsdp"])
    assert "no checkpoint" in error([*args[:6], str(tmp_path / "new"), *args[7:], "--resume"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "w1 w2"}\n{"body": 3}\n')
    assert "bad.jsonl:2" in error([*args[:4], str(bad), "--out", str(tmp_path / "x"), *args[7:]])
    assert "must end in .txt or .jsonl" in error(
        [*args[:4], str(tmp_path / "d.csv"), "--out", str(tmp_path / "y"), *args[7:]]
    )
    assert "seq_len" in error([*args[:6], str(tmp_path / "z"), "--seq-len", "8", "--chunk", "16"])
    assert (
        "neither a model directory"
        in error(
            [
                "oomb-finetune",
                "--model",
                "no-such-model",
                "--data",
                str(corpus),
                "--out",
                str(tmp_path),
            ]
        )
        or "lc-agents" in capsys.readouterr().err
    )


def test_lora_adapters_come_from_apply_lora_and_bad_alpha_is_refused(
    model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    pytest.importorskip("peft")
    from lc_train import apply_lora

    result = finetune(
        _cfg(model_dir, corpus, tmp_path / "a", lora_rank=2, lora_alpha=4, seed=3, steps=1),
        stop_after=0,
        progress=False,
    )
    mine = LlamaForCausalLM.from_pretrained(model_dir)
    apply_lora(mine, rank=2, alpha=4, seed=3)  # the adapters finetune starts from
    want = _trained(mine)
    got = _trained(result.model)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name].cpu(), want[name]), name
    with pytest.raises(FinetuneError, match="alpha must be >= 1"):
        finetune(_cfg(model_dir, corpus, tmp_path / "b", lora_rank=2, lora_alpha=0), progress=False)


def test_windows_visit_every_window_once_per_epoch() -> None:
    windows = TokenWindows(torch.arange(50), seq_len=10, seed=3)
    first = windows.batch(0, 5)
    second = windows.batch(5, 5)
    assert sorted(first[:, 0].tolist()) == [0, 10, 20, 30, 40]
    assert sorted(second[:, 0].tolist()) == [0, 10, 20, 30, 40]
    assert first[:, 0].tolist() != second[:, 0].tolist()  # a new order each epoch
    assert torch.equal(windows.batch(3, 4), torch.cat([first[3:], second[:2]]))
    with pytest.raises(FinetuneError, match="fewer than one window"):
        TokenWindows(torch.arange(5), seq_len=10, seed=0)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="seq_len"):
        FinetuneConfig(model="m", data="d", out="o", seq_len=0)
    with pytest.raises(ValueError, match="chunk"):
        FinetuneConfig(model="m", data="d", out="o", seq_len=64, chunk=128)
    with pytest.raises(ValueError, match="multiple of page_size"):
        FinetuneConfig(model="m", data="d", out="o", seq_len=64, chunk=48, page=32)


def test_gemma3_is_refused_before_loading(tmp_path: Path, corpus: Path, capsys) -> None:
    """Gemma 3 interleaves sliding-window layers: a clear error, no model load, no traceback."""
    code = main(
        ["oomb-finetune", "--model", "gemma3", "--data", str(corpus), "--out", str(tmp_path)]
    )
    assert code == 2
    assert "sliding-window" in capsys.readouterr().err

"""The memory-agent recipe script (``benchmarks/memagent_train.py``) under ``torchrun``.

Two gloo ranks run its ``sft`` stage and then ``dapo --from-stage sft`` on a tiny
random-init Llama with a byte-level tokenizer (a chat template, no download), two steps
each. Every rank records its trainable weights at each checkpoint: with the script's DDP
wrapping they are the same on both ranks after each stage; a last DAPO step without it
(the negative control, each rank on its own data) leaves them different, so the check
sees unsynchronised gradients. A random-init model never answers right, so the worker alternates the
rewards within each group (0, 1, ...) to make every group informative and exercise the
DAPO update.

Run as a script under ``torchrun``, this file is the worker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).resolve()
SCRIPT = HERE.parents[1] / "benchmarks" / "memagent_train.py"
CHAT = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer() -> Any:
    """Byte-level tokenizer (one token per byte, no merges) with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    inner = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    inner.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    inner.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=inner, eos_token="<|im_end|>", pad_token="<|im_end|>"
    )
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tok.chat_template = CHAT
    return tok


def tiny_model(tok: Any) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        eos_token_id=tok.eos_token_id,
    )
    return LlamaForCausalLM(cfg).eval()


COMMON = [
    "--tasks", "niah_single",
    "--train-length", "600",
    "--chunk", "256",
    "--memory", "96",
    "--threads", "1",
]  # fmt: skip


def _worker(out: Path) -> None:
    import shutil

    import lc_train.rl.memagent as rl_memagent
    import lc_train.rl.trainer as trainer
    from conftest import end_process_group

    spec = importlib.util.spec_from_file_location("memagent_train", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tok = tiny_tokenizer()
    script.base_model = lambda args: (tiny_model(tok), tok)
    # the stages share one process group (end_process_group destroys it at the end)
    script.end_distributed = lambda world: torch.distributed.barrier()

    real_rollout = rl_memagent.rollout_group

    def rollout_group(*args: Any, **kw: Any) -> Any:
        group = real_rollout(*args, **kw)
        for i, episode in enumerate(group):
            episode.reward = float(i % 2)
        return group

    rl_memagent.rollout_group = rollout_group

    phase = ""
    weights: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    real_save = trainer.save_checkpoint

    def save_checkpoint(path: Any, model: Any, opt: Any, *, step: int, **kw: Any) -> None:
        inner = getattr(model, "module", model)
        weights.setdefault(phase, {})[step] = {
            n: p.detach().clone() for n, p in inner.named_parameters() if p.requires_grad
        }
        real_save(path, model, opt, step=step, **kw)

    trainer.save_checkpoint = save_checkpoint

    def run(*argv: str, work: str = "work", steps: int = 2) -> None:
        where = ["--workdir", str(out / work), "--results", str(out / f"{work}.json")]
        sys.argv = [str(SCRIPT), *argv, *COMMON, *where, "--steps", str(steps)]
        script.main()

    phase = "sft"
    run("sft", "--train-items", "3", "--batch", "2", "--micro", "1", "--save-every", "1")
    dapo = ("dapo", "--from-stage", "sft", "--group", "2", "--micro", "2")
    phase = "dapo"
    run(*dapo)
    # negative control: the same DAPO step without the DDP wrapping (no gradient sync)
    if os.environ["RANK"] == "0":
        (out / "control").mkdir()
        shutil.copy(out / "work" / "sft.pt", out / "control" / "sft.pt")
    torch.distributed.barrier()
    script.data_parallel = lambda model, world: model
    phase = "control"
    run(*dapo, work="control", steps=1)
    torch.save(weights, out / f"rank{os.environ['RANK']}.pt")
    end_process_group()


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_memagent_train_sft_and_dapo_under_torchrun(tmp_path: Path, torchrun: Any) -> None:
    pytest.importorskip("lc_agents")
    pytest.importorskip("lc_evals")
    pytest.importorskip("peft")
    torchrun(str(HERE), str(tmp_path), timeout=240)
    r0 = torch.load(tmp_path / "rank0.pt")
    r1 = torch.load(tmp_path / "rank1.pt")
    results = json.loads((tmp_path / "work.json").read_text())
    for stage in ("sft", "dapo"):
        assert sorted(r0[stage]) == sorted(r1[stage]) == [1, 2]
    assert results["sft"]["world_size"] == results["dapo"]["world_size"] == 2
    assert len(results["sft"]["loss"]) == 2
    steps = results["dapo"]["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:  # alternating rewards: every step is informative and updates
        assert s["turns"] > 0
        assert s["tokens"] > 0
        assert "loss" in s
        assert s["reward_mean"] == 0.5
        assert s["accuracy"] == 0.5
        assert len(s["rewards"]) == 2  # one group per rank, gathered
    # the weights moved: SFT from the fresh LoRA, DAPO from the SFT weights
    assert not _same(r0["sft"][2], r0["dapo"][2])
    # DDP averages the gradients: both ranks take the same steps
    assert _same(r0["sft"][2], r1["sft"][2])
    assert _same(r0["dapo"][2], r1["dapo"][2])
    # without it each rank steps on its own gradients and the weights part
    assert not _same(r0["control"][1], r1["control"][1])
    assert not _same(r0["control"][1], r0["sft"][2])


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))

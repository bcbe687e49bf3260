"""SoLoPOTrainer (TRL DPOTrainer subclass) on a tiny random Llama with LoRA."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("peft")

from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    TrainerCallback,
)
from trl import DPOConfig, DPOTrainer

from lc_train.preference import SoLoPOConfig, SoLoPOTrainer, response_logps
from lc_train.preference.losses import ResponseLogps, solopo_loss

torch.set_num_threads(1)

CHARS = [chr(i) for i in range(32, 127)] + ["\n"]
VOCAB = {"<pad>": 0, "</s>": 1, **{c: i + 2 for i, c in enumerate(CHARS)}}


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character: responses tokenize the same after any prompt."""
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>")
    hf.chat_template = (
        "{% for m in messages %}{{ m['role'][0] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}a: {% endif %}"
    )
    return hf


def tiny_llama(seed: int = 0, vocab: int = len(VOCAB)) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return LlamaForCausalLM(config)


def rows(n: int = 4) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        fact = f"The code of box {i} is {7 * i + 3}."
        out.append(
            {
                "prompt": f"{fact}\n\nWhat is the code of box {i}?\n",
                "long_prompt": (
                    f"Rain fell on the old harbour{'.' * i}\n\n{fact}\n\nGulls circled the "
                    f"masts.\n\nWhat is the code of box {i}?\n"
                ),
                "chosen": str(7 * i + 3),
                "rejected": str(7 * i + 4 + i),
            }
        )
    return out


def lora() -> LoraConfig:
    # random A and B, so the policy differs from the reference (adapters off) at step 0
    return LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )


def dpo_args(tmp: Path, **kw: Any) -> DPOConfig:
    base = {
        "output_dir": str(tmp),
        "max_steps": 1,
        "per_device_train_batch_size": 4,
        "learning_rate": 0.5,
        "optim": "sgd",
        "lr_scheduler_type": "constant",
        "max_grad_norm": 0.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "max_length": None,
        "disable_tqdm": True,
        "beta": 0.5,
        "seed": 3,
        "gradient_checkpointing": False,
    }
    base.update(kw)
    return DPOConfig(**base)


def lora_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters() if "lora_" in k}


def test_zero_alignment_weight_reproduces_trl_dpo(tmp_path: Path) -> None:
    """alpha = 0: the SoLoPO update equals TRL's own DPO update (loss and parameters)."""
    tok, model = char_tokenizer(), tiny_llama()
    data = Dataset.from_list(rows())
    ours = SoLoPOTrainer(
        copy.deepcopy(model),
        args=dpo_args(tmp_path / "a"),
        solopo=SoLoPOConfig(method="dpo", beta=0.5, alignment_weight=0.0),
        train_dataset=data,
        processing_class=tok,
        peft_config=lora(),
    )
    theirs = DPOTrainer(
        copy.deepcopy(model),
        args=dpo_args(tmp_path / "b"),
        train_dataset=data.remove_columns(["long_prompt"]),
        processing_class=tok,
        peft_config=lora(),
    )
    before = lora_state(ours.model)
    torch.testing.assert_close(before, lora_state(theirs.model))
    ours.train()
    theirs.train()
    assert ours.state.log_history[0]["loss"] == pytest.approx(
        theirs.state.log_history[0]["loss"], rel=1e-5
    )
    after = lora_state(ours.model)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the step did something
    torch.testing.assert_close(after, lora_state(theirs.model), rtol=1e-5, atol=1e-6)


def _oracle_logps(model: Any, tok: Any, prompt: str, response: str) -> tuple[float, int]:
    """Summed log-prob of response + EOS after prompt, one unpadded sequence."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    r = tok(response + tok.eos_token, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p + r])
    mask = torch.tensor([[0] * len(p) + [1] * len(r)])
    out = response_logps(model, ids, mask)
    return float(out.logps[0]), len(r)


@pytest.mark.parametrize(
    ("method", "chosen_only"), [("dpo", True), ("dpo", False), ("simpo", True), ("orpo", False)]
)
def test_loss_matches_an_independent_computation(
    tmp_path: Path, method: str, chosen_only: bool
) -> None:
    """The trainer's batch loss equals solopo_loss on log-probs of unpadded sequences."""
    tok = char_tokenizer()
    cfg = SoLoPOConfig(method=method, beta=0.5, alignment_weight=0.7, chosen_only=chosen_only)
    trainer = SoLoPOTrainer(
        tiny_llama(),
        args=dpo_args(tmp_path),
        solopo=cfg,
        train_dataset=Dataset.from_list(rows(3)),
        processing_class=tok,
        peft_config=lora(),
    )
    model = trainer.model
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(3)])
    long_rows = 3 if chosen_only else 6
    assert batch["long_input_ids"].shape[0] == long_rows
    with torch.no_grad():
        got = float(trainer.compute_loss(model, batch))

    def side(prompt_key: str, response_key: str) -> ResponseLogps:
        logps, lengths, refs = [], [], []
        for row in rows(3):
            lp, n = _oracle_logps(model, tok, row[prompt_key], row[response_key])
            with model.disable_adapter():
                ref, _ = _oracle_logps(model, tok, row[prompt_key], row[response_key])
            logps.append(lp)
            lengths.append(n)
            refs.append(ref)
        return ResponseLogps(torch.tensor(logps), torch.tensor(lengths), torch.tensor(refs))

    with torch.no_grad():
        want, _ = solopo_loss(
            cfg,
            side("prompt", "chosen"),
            side("prompt", "rejected"),
            side("long_prompt", "chosen"),
            None if chosen_only else side("long_prompt", "rejected"),
        )
    assert got == pytest.approx(float(want), rel=1e-4, abs=1e-5)


def test_precomputed_reference_gives_the_same_loss(tmp_path: Path) -> None:
    tok = char_tokenizer()
    cfg = SoLoPOConfig(method="dpo", beta=0.5, alignment_weight=1.0, chosen_only=False)
    losses = []
    for pre in (False, True):
        trainer = SoLoPOTrainer(
            tiny_llama(),
            args=dpo_args(tmp_path / str(pre), precompute_ref_log_probs=pre),
            solopo=cfg,
            train_dataset=Dataset.from_list(rows(2)),
            processing_class=tok,
            peft_config=lora(),
        )
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
        assert ("ref_long_chosen_logps" in batch) is pre
        with torch.no_grad():
            losses.append(float(trainer.compute_loss(trainer.model, batch)))
            if pre:  # our long-context precompute equals the online reference pass
                online = trainer._reference_logps(
                    batch["long_input_ids"],
                    batch["long_attention_mask"],
                    batch["long_completion_mask"],
                )
                stored = torch.cat(
                    [batch["ref_long_chosen_logps"], batch["ref_long_rejected_logps"]]
                )
                torch.testing.assert_close(stored.float(), online, rtol=1e-5, atol=1e-5)
    # TRL's short-context precompute agrees with its online pass to float rounding (~1e-5)
    assert losses[0] == pytest.approx(losses[1], rel=1e-3)


class _StopAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            control.should_save = True
            control.should_training_stop = True


def test_resume_after_interruption_matches_uninterrupted(tmp_path: Path) -> None:
    tok = char_tokenizer()
    data = Dataset.from_list(rows(6))
    cfg = SoLoPOConfig(method="dpo", beta=0.5, alignment_weight=1.0)

    def make(out: Path, callbacks: list[Any] | None = None) -> SoLoPOTrainer:
        args = dpo_args(
            out,
            max_steps=4,
            per_device_train_batch_size=2,
            optim="adamw_torch",
            learning_rate=1e-2,
            lr_scheduler_type="linear",
        )
        return SoLoPOTrainer(
            tiny_llama(),
            args=args,
            solopo=cfg,
            train_dataset=data,
            processing_class=tok,
            peft_config=lora(),
            callbacks=callbacks,
        )

    full = make(tmp_path / "full")
    full.train()
    interrupted = make(tmp_path / "cut", [_StopAt(2)])
    interrupted.train()
    assert interrupted.state.global_step == 2
    assert (tmp_path / "cut" / "checkpoint-2").is_dir()
    resumed = make(tmp_path / "cut")
    resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-2"))
    assert resumed.state.global_step == 4
    torch.testing.assert_close(lora_state(resumed.model), lora_state(full.model))
    mid = lora_state(interrupted.model)
    assert any(not torch.equal(mid[k], lora_state(full.model)[k]) for k in mid)


def _make(tmp: Path, data: list[dict[str, str]], **kw: Any) -> SoLoPOTrainer:
    return SoLoPOTrainer(
        kw.pop("model", tiny_llama()),
        args=kw.pop("args", dpo_args(tmp)),
        solopo=kw.pop("solopo", SoLoPOConfig(beta=0.5)),
        train_dataset=Dataset.from_list(data),
        processing_class=char_tokenizer(),
        peft_config=lora(),
        **kw,
    )


def test_bad_inputs_get_clear_errors(tmp_path: Path) -> None:
    bad = rows(2)
    bad[1]["rejected"] = "  "
    with pytest.raises(ValueError, match="row 1: the rejected response is empty"):
        _make(tmp_path, bad)
    bad = rows(2)
    bad[0]["long_prompt"] = "Only noise.\n\nWhat is the code of box 0?\n"
    with pytest.raises(ValueError, match="row 0: long_prompt does not contain"):
        _make(tmp_path, bad)
    with pytest.raises(ValueError, match="lacks column"):
        _make(tmp_path, [{k: v for k, v in r.items() if k != "long_prompt"} for r in rows(2)])
    with pytest.raises(ValueError, match="reference model mismatch"):
        _make(tmp_path, rows(2), ref_model=tiny_llama(vocab=len(VOCAB) + 5))
    with pytest.raises(ValueError, match="beta"):
        _make(tmp_path, rows(2), solopo=SoLoPOConfig(beta=0.1))
    with pytest.raises(ValueError, match="loss_type"):
        _make(tmp_path, rows(2), args=dpo_args(tmp_path, loss_type=["ipo"]))
    with pytest.raises(ValueError, match="max_length"):
        _make(tmp_path, rows(2), args=dpo_args(tmp_path, max_length=60))


def test_separate_reference_model_is_used(tmp_path: Path) -> None:
    """With an explicit ref_model the DPO rewards use it (not the adapter-free base)."""
    tok = char_tokenizer()
    ref = tiny_llama(seed=1)
    trainer = _make(
        tmp_path, rows(2), ref_model=ref, solopo=SoLoPOConfig(beta=0.5, alignment_weight=0)
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    with torch.no_grad():
        got = float(trainer.compute_loss(trainer.model, batch))
        margins = []
        for row in rows(2):
            c, _ = _oracle_logps(trainer.model, tok, row["prompt"], row["chosen"])
            r, _ = _oracle_logps(trainer.model, tok, row["prompt"], row["rejected"])
            rc, _ = _oracle_logps(ref, tok, row["prompt"], row["chosen"])
            rr, _ = _oracle_logps(ref, tok, row["prompt"], row["rejected"])
            margins.append(0.5 * ((c - rc) - (r - rr)))
    want = float(torch.nn.functional.softplus(-torch.tensor(margins)).mean())
    assert got == pytest.approx(want, rel=1e-4)


def test_chat_sampler_is_seeded_and_build_pairs_uses_it() -> None:
    from lc_train.preference import build_pairs
    from lc_train.preference.sampling import chat_answer, chat_sampler

    tok, model = char_tokenizer(), tiny_llama()
    first = chat_sampler(model, tok, max_new_tokens=4, seed=5)("The code is 7.", "Code?", 3)
    again = chat_sampler(model, tok, max_new_tokens=4, seed=5)("The code is 7.", "Code?", 3)
    assert first == again
    assert len(first) == 3
    greedy = chat_answer(model, tok, "The code is 7.", "Code?", max_new_tokens=4)
    assert greedy == chat_answer(model, tok, "The code is 7.", "Code?", max_new_tokens=4)
    # a scorer that accepts exactly the first sample: the pair is (sample 0, a different one)
    samples = chat_sampler(model, tok, max_new_tokens=4, seed=9)("ctx", "q?", 4)
    pairs = build_pairs(
        [("ctx", "q?", [samples[0]])],
        sample=chat_sampler(model, tok, max_new_tokens=4, seed=9),
        is_correct=lambda r, answers: r == answers[0],
        distractors=["Unrelated filler sentence."],
        long_length=200,
    )
    assert len(pairs) == 1
    assert pairs[0].chosen == samples[0]
    assert pairs[0].rejected != samples[0]
    assert "ctx" in pairs[0].long_context
    with pytest.raises(ValueError, match="temperature"):
        chat_sampler(model, tok, temperature=0.0)


@pytest.mark.parametrize("method", ["simpo", "orpo"])
def test_reference_free_methods_train_a_full_model_without_a_reference(
    tmp_path: Path, method: str
) -> None:
    """SimPO and ORPO need no reference model: none is built (nor loaded from a path)."""
    tok, model = char_tokenizer(), tiny_llama()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer = SoLoPOTrainer(
        model,
        args=dpo_args(tmp_path, learning_rate=0.05),
        solopo=SoLoPOConfig(method=method, beta=0.5),
        train_dataset=Dataset.from_list(rows(4)),
        processing_class=tok,
    )
    assert trainer.ref_model is None
    trainer.train()
    moved = max((v - before[k]).abs().max().item() for k, v in model.named_parameters())
    assert moved > 0


def test_a_trl_without_the_fused_lm_head_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trl.trainer.dpo_trainer as dpo

    monkeypatch.delattr(dpo, "add_fused_lm_head")
    with pytest.raises(ImportError, match="fused LM-head"):
        SoLoPOTrainer(
            tiny_llama(),
            args=dpo_args(tmp_path),
            solopo=SoLoPOConfig(method="simpo", beta=0.5),
            train_dataset=Dataset.from_list(rows(2)),
            processing_class=char_tokenizer(),
        )


@pytest.mark.parametrize("old", ["1.15.0", "1.14.2", "0.29.1"])
def test_a_trl_below_the_floor_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str
) -> None:
    import trl

    monkeypatch.setattr(trl, "__version__", old)
    with pytest.raises(ImportError, match=r"trl >= 1\.16"):
        SoLoPOTrainer(
            tiny_llama(),
            args=dpo_args(tmp_path),
            solopo=SoLoPOConfig(method="simpo", beta=0.5),
            train_dataset=Dataset.from_list(rows(2)),
            processing_class=char_tokenizer(),
        )

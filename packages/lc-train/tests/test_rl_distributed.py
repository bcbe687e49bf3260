"""Memory-agent SFT and DAPO steps under ``torchrun``: two gloo ranks equal one process.

Run as a script under ``python -m torch.distributed.run --nproc_per_node 2 this_file OUT``,
this file is the worker: the policy is wrapped in ``DistributedDataParallel`` and each
rank takes its own, unequal share of the turns (3 and 2 turns of different lengths,
micro-batches of 2, so the ranks run 2 and 1 micro-batches). The token-level mean must be
taken over the completion tokens of both ranks, so the gradients, the statistics and the
step must equal one process on all 5 turns. Rank 0 saves what it got; the test computes
the single-process reference itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from lc_train.rl import DAPOConfig
from lc_train.rl.memagent import Turn
from lc_train.rl.trainer import dapo_step, load_checkpoint, save_checkpoint, sft_step

HERE = Path(__file__).resolve()
VOCAB = 97
SPLIT = 3  # rank 0 takes turns[:3], rank 1 the rest


def _policy() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
    )
    for name, p in model.named_parameters():  # a trained subset, as with adapters
        p.requires_grad_("layers.1" in name or "lm_head" in name)
    return model


def _turns() -> tuple[list[Turn], torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    turns = []
    for i in range(5):
        prompt = torch.randint(
            0, VOCAB, (int(torch.randint(3, 12, (1,), generator=g)),), generator=g
        )
        reply = torch.randint(0, VOCAB, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g)
        # recorded sampling log-probs for some turns (ratios far from 1: the clip is
        # active on part of the tokens), on-policy for the others
        logps = (-torch.rand(len(reply), generator=g) * 6 - 2).tolist() if i % 2 == 0 else None
        turns.append(
            Turn(
                tuple(prompt.tolist()),
                tuple(reply.tolist()),
                "answer" if i == 4 else "update",
                None if logps is None else tuple(logps),
            )
        )
    return turns, torch.tensor([1.0, -0.5, 2.0, -1.5, 0.7])


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _steps(model: Any, turns: list[Turn], adv: torch.Tensor, ckpt: Path) -> dict[str, Any]:
    """SFT and DAPO gradients, then one clipped DAPO step with SGD, and a checkpoint."""
    inner = getattr(model, "module", model)
    cfg = DAPOConfig(eps_low=0.2, eps_high=0.28)
    out: dict[str, Any] = {"sft": sft_step(model, None, turns, micro_batch=2)}
    out["sft_grads"] = _grads(inner)
    inner.zero_grad(set_to_none=True)
    out["dapo"] = dapo_step(model, None, turns, adv, cfg, micro_batch=2)
    out["dapo_grads"] = _grads(inner)
    inner.zero_grad(set_to_none=True)
    opt = torch.optim.SGD([p for p in inner.parameters() if p.requires_grad], lr=0.5)
    out["step"] = dapo_step(model, opt, turns, adv, cfg, micro_batch=2, max_grad_norm=0.05)
    out["params"] = {n: p.detach().clone() for n, p in inner.named_parameters()}
    save_checkpoint(ckpt, model, opt, step=1)
    return out


def _worker(out: Path) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from conftest import end_process_group

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    turns, adv = _turns()
    mine = slice(0, SPLIT) if rank == 0 else slice(SPLIT, None)
    model = DistributedDataParallel(_policy())
    got = _steps(model, turns[mine], adv[mine], out / "ckpt.pt")
    try:  # a rank without turns: every rank raises instead of waiting in a collective
        sft_step(model, None, turns[mine] if rank == 0 else [], micro_batch=2)
        got["empty"] = ""
    except ValueError as exc:
        got["empty"] = str(exc)
    if rank == 0:
        torch.save(got, out / "rank0.pt")
    end_process_group()


def _close(a: torch.Tensor, b: torch.Tensor, name: str, tol: float = 1e-5) -> None:
    err = ((a - b).norm() / b.norm().clamp_min(1e-12)).item()
    assert err < tol, f"{name}: relative error {err:.2e}"


def test_two_ranks_equal_one_process_on_the_union_of_turns(tmp_path: Path, torchrun: Any) -> None:
    torchrun(str(HERE), str(tmp_path))
    ddp = torch.load(tmp_path / "rank0.pt", weights_only=False)
    turns, adv = _turns()
    one = _steps(_policy(), turns, adv, tmp_path / "one.pt")

    for kind in ("sft", "dapo"):
        grads = one[f"{kind}_grads"]
        assert set(ddp[f"{kind}_grads"]) == set(grads)
        assert all("layers.1" in n or "lm_head" in n for n in grads)
        for name, g in grads.items():
            _close(ddp[f"{kind}_grads"][name], g, f"{kind} {name}")
        assert (
            ddp[kind]["tokens"] == one[kind]["tokens"] == sum(len(t.completion_ids) for t in turns)
        )
        assert abs(ddp[kind]["loss"] - one[kind]["loss"]) < 1e-6 * max(1.0, abs(one[kind]["loss"]))
    assert 0.0 < one["dapo"]["clip_frac"] < 1.0  # the clip is active on some tokens only
    assert ddp["dapo"]["clip_frac"] == one["dapo"]["clip_frac"]

    # the clipped step: same global gradient norm, same parameters
    assert one["step"]["grad_norm"] > 0.05  # clipping was active
    assert (
        abs(ddp["step"]["grad_norm"] - one["step"]["grad_norm"]) < 1e-5 * one["step"]["grad_norm"]
    )
    start = {n: p.detach() for n, p in _policy().named_parameters()}
    assert max((one["params"][n] - start[n]).abs().max().item() for n in start) > 1e-3
    for name, value in one["params"].items():
        _close(ddp["params"][name] - start[name], value - start[name], f"update of {name}")

    # rank 0's checkpoint holds the unwrapped names and restores a plain model
    restored = _policy()
    assert load_checkpoint(tmp_path / "ckpt.pt", restored)["step"] == 1
    for name, p in restored.named_parameters():
        assert torch.equal(p.detach(), ddp["params"][name]), name

    assert "hold no completion tokens" in ddp["empty"]


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))

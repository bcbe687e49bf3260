"""Passkey retrieval beyond the training length: BAM vs ALiBi, NoPE and RoPE.

Each model (same size, same seed, same number of steps) learns at length ``L`` to answer a
passkey hidden at a random depth in random filler tokens, then is evaluated at
``L, 2L, 4L, ..., max_mult * L`` without any fine-tuning. Writes
``docs/benchmarks/lc-attention-bam/passkey.json`` and ``passkey.png``.

Sequence layout (token ids): filler ``F`` tokens, ``KEY`` marker, passkey token, more filler,
then ``QUERY``; the model must output the passkey at the ``QUERY`` position.

Run: ``uv run python packages/lc-attention/benchmarks/bam_passkey.py`` (about 10 minutes on
a 2-core CPU with the defaults).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from tqdm import tqdm

from lc_attention.bam import BAMTransformer, BAMTransformerConfig

N_KEYS = 32  # passkey values: ids 0..31
N_FILLER = 16  # filler ids 32..47
KEY = N_KEYS + N_FILLER
QUERY = KEY + 1
VOCAB = QUERY + 1
OUT_DIR = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-attention-bam"


def passkey_batch(
    batch: int, length: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tokens [batch, length]`` and ``passkeys [batch]`` with the key at a uniform depth."""
    if length < 4:
        raise ValueError(f"length must be >= 4, got {length}")
    tokens = torch.randint(N_KEYS, N_KEYS + N_FILLER, (batch, length), generator=gen)
    keys = torch.randint(0, N_KEYS, (batch,), generator=gen)
    pos = torch.randint(0, length - 2, (batch,), generator=gen)
    rows = torch.arange(batch)
    tokens[rows, pos] = KEY
    tokens[rows, pos + 1] = keys
    tokens[:, -1] = QUERY
    return tokens, keys


def train(
    model: BAMTransformer,
    length: int,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    prior_lr_mult: float = 1.0,
) -> list[float]:
    gen = torch.Generator().manual_seed(seed)
    prior_ids = {id(p) for pr in model.priors() for p in pr.parameters()}
    groups = [
        {"params": [p for p in model.parameters() if id(p) not in prior_ids]},
        {"params": [p for p in model.parameters() if id(p) in prior_ids], "lr": lr * prior_lr_mult},
    ]
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))),
    )
    losses = []
    model.train()
    for _ in tqdm(range(steps), desc=model.config.position, leave=False):
        tokens, keys = passkey_batch(batch, length, gen)
        logits = model(tokens)[:, -1, :N_KEYS]
        loss = torch.nn.functional.cross_entropy(logits, keys)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def accuracy(model: BAMTransformer, length: int, samples: int, seed: int, batch: int) -> float:
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    hits = 0
    for start in range(0, samples, batch):
        n = min(batch, samples - start)
        tokens, keys = passkey_batch(n, length, gen)
        hits += int((model(tokens)[:, -1, :N_KEYS].argmax(-1) == keys).sum())
    return hits / samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-mult", type=int, default=64)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--models", default="bam,bam-ssmax,alibi,nope,rope")
    ap.add_argument(
        "--prior-lr-mult",
        type=float,
        default=1.0,
        help="learning-rate factor of the prior parameters",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    mults = [2**i for i in range(int(math.log2(args.max_mult)) + 1)]
    lengths = [args.train_len * m for m in mults]
    results: dict[str, dict] = {}
    for name in args.models.split(","):
        position = "bam" if name.startswith("bam") else name
        cfg = BAMTransformerConfig(
            vocab_size=VOCAB,
            dim=64,
            num_layers=2,
            num_heads=4,
            position=position,
            scalable_softmax=name.endswith("ssmax"),
            block_size=256,
        )
        model = BAMTransformer(cfg, seed=args.seed)
        t0 = time.perf_counter()
        losses = train(
            model, args.train_len, args.steps, args.batch, args.lr, args.seed, args.prior_lr_mult
        )
        train_s = time.perf_counter() - t0
        acc = {}
        t0 = time.perf_counter()
        for length in lengths:
            acc[str(length)] = accuracy(model, length, args.samples, seed=10_000 + length, batch=16)
        eval_s = time.perf_counter() - t0
        priors = [
            {
                "scale": p.scale.tolist(),
                "shape": p.theta_b.tolist(),
                "loc": p.loc.tolist(),
                **({"ssmax_s": p.ssmax_s.tolist()} if p.ssmax_s is not None else {}),
            }
            for p in model.priors()
        ]
        results[name] = {
            "accuracy": acc,
            "final_loss": sum(losses[-50:]) / len(losses[-50:]),
            "train_seconds": round(train_s, 1),
            "eval_seconds": round(eval_s, 1),
            "priors": priors,
        }
        print(
            name,
            {k: round(v, 3) for k, v in acc.items()},
            f"loss={results[name]['final_loss']:.3f}",
            flush=True,
        )

    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "task": "passkey retrieval, random filler, key at uniform depth",
        "train_len": args.train_len,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "prior_lr_mult": args.prior_lr_mult,
        "samples_per_length": args.samples,
        "chance": 1 / N_KEYS,
        "model": {"dim": 64, "layers": 2, "heads": 4},
        "machine": "2-core CPU",
        "results": results,
    }
    (args.out / "passkey.json").write_text(json.dumps(payload, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in results.items():
        ax.plot(mults, [r["accuracy"][str(n)] for n in lengths], marker="o", label=name)
    ax.axhline(1 / N_KEYS, color="grey", ls=":", label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"evaluation length / training length ({args.train_len})")
    ax.set_ylabel("passkey accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    ax.set_title("Passkey retrieval beyond the training length")
    fig.tight_layout()
    fig.savefig(args.out / "passkey.png", dpi=120)
    print("wrote", args.out / "passkey.json")


if __name__ == "__main__":
    main()

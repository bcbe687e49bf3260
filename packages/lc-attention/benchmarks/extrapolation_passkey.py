"""Passkey retrieval beyond the training length: RoPE, ALiBi, NoPE, BAM and chunk-sparse HSA.

Every model (same width, depth of attention stack, seed, data stream, optimizer and number
of steps) learns at length ``L`` to answer a passkey hidden at a random depth in random
filler tokens, then is evaluated at ``L * m`` for the given multipliers without any
fine-tuning. Writes ``docs/benchmarks/lc-attention-extrapolation/passkey.json`` and
``passkey.png``.

Sequence layout (token ids): filler tokens, a ``KEY`` marker, the passkey token, more
filler, then ``QUERY``; the model must output the passkey at the ``QUERY`` position.

Models (``--models``, comma separated):

- ``rope``, ``alibi``, ``nope``, ``bam``: [BAMTransformer][lc_attention.bam.BAMTransformer]
  with that positional encoding (``bam``: prior shape init ``--bam-shape-init``, prior
  learning rate ``lr * --prior-lr-mult``); ``bam-ssmax`` adds scalable softmax;
  ``bam-default`` is BAM with shape init 1 and the common learning rate;
- ``hsa``: [HSATransformer][lc_attention.hsa.HSATransformer] (one sliding-window block,
  chunk encoder, one sliding-window + chunk-retrieval block).

Long sequences are evaluated with fewer samples (``--long-samples`` from ``--long-from``
times ``L``) and smaller batches; BAM/ALiBi/NoPE/RoPE switch to the blockwise attention
path beyond 1024 keys and HSA processes queries in blocks, so memory stays linear in the
length.

Run: ``nice uv run python packages/lc-attention/benchmarks/extrapolation_passkey.py``
(about 35 minutes on a heavily shared 2-core CPU with the defaults).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from lc_attention.bam import BAMTransformer, BAMTransformerConfig
from lc_attention.hsa import HSATransformer, HSATransformerConfig

N_KEYS = 32  # passkey values: ids 0..31
N_FILLER = 16  # filler ids 32..47
KEY = N_KEYS + N_FILLER
QUERY = KEY + 1
VOCAB = QUERY + 1
OUT_DIR = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-attention-extrapolation"


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


def build(name: str, args: argparse.Namespace) -> nn.Module:
    """The model called ``name`` (see the module docstring), initialised with ``args.seed``."""
    if name == "hsa":
        cfg = HSATransformerConfig(
            vocab_size=VOCAB,
            dim=args.dim,
            num_heads=4,
            retrieval_heads=2,
            lower_layers=1,
            upper_layers=1,
            encoder_layers=1,
            chunk_size=args.chunk_size,
            topk=args.top_k,
            window=args.window,
            gumbel_noise=args.gumbel,
        )
        return HSATransformer(cfg, seed=args.seed)
    position = "bam" if name.startswith("bam") else name
    bam_custom = name in ("bam", "bam-ssmax")
    cfg_b = BAMTransformerConfig(
        vocab_size=VOCAB,
        dim=args.dim,
        num_layers=2,
        num_heads=4,
        position=position,
        shape_init=_shape(args.bam_shape_init) if bam_custom else 1.0,
        scalable_softmax=name.endswith("ssmax"),
        block_size=256,
    )
    return BAMTransformer(cfg_b, seed=args.seed)


def _shape(v: str) -> float | str:
    return v if v == "linear" else float(v)


def prior_params(model: nn.Module) -> list[nn.Parameter]:
    if isinstance(model, BAMTransformer):
        return [p for pr in model.priors() for p in pr.parameters() if p.requires_grad]
    return []


def train(
    model: nn.Module,
    name: str,
    length: int,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    prior_lr_mult: float,
) -> list[float]:
    gen = torch.Generator().manual_seed(seed)
    noise_gen = torch.Generator().manual_seed(seed + 1)
    prior_ids = {id(p) for p in prior_params(model)}
    groups = [
        {"params": [p for p in model.parameters() if id(p) not in prior_ids and p.requires_grad]}
    ]
    if prior_ids:
        groups.append({"params": prior_params(model), "lr": lr * prior_lr_mult})
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))),
    )
    losses = []
    model.train()
    for _ in tqdm(range(steps), desc=name, leave=False):
        tokens, keys = passkey_batch(batch, length, gen)
        if isinstance(model, HSATransformer):
            out = model(tokens, generator=noise_gen)
        else:
            out = model(tokens)
        assert isinstance(out, torch.Tensor)
        loss = nn.functional.cross_entropy(out[:, -1, :N_KEYS], keys)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, length: int, samples: int, seed: int, max_tokens: int) -> float:
    """Passkey accuracy over ``samples`` fresh sequences, batched to ``max_tokens`` tokens."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    batch = max(1, min(16, max_tokens // length))
    hits = 0
    for start in range(0, samples, batch):
        n = min(batch, samples - start)
        tokens, keys = passkey_batch(n, length, gen)
        logits = model(tokens)
        assert isinstance(logits, torch.Tensor)
        hits += int((logits[:, -1, :N_KEYS].argmax(-1) == keys).sum())
    return hits / samples


def describe(model: nn.Module) -> dict:
    if isinstance(model, BAMTransformer):
        return {
            "priors": [
                {
                    "scale": [round(x, 5) for x in p.scale.tolist()],
                    "shape": [round(x, 4) for x in p.theta_b.tolist()],
                    "loc": [round(x, 4) for x in p.loc.tolist()],
                    **({"ssmax_s": p.ssmax_s.tolist()} if p.ssmax_s is not None else {}),
                }
                for p in model.priors()
            ]
        }
    return {}


def plot(results: dict[str, dict], train_len: int, path: Path) -> None:
    """Accuracy against the length multiplier, one line per model (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    markers = "osD^vP*X"
    for i, (name, r) in enumerate(results.items()):
        xs = sorted(int(k) for k in r["accuracy"])
        ax.plot(
            [x / train_len for x in xs],
            [r["accuracy"][str(x)] for x in xs],
            marker=markers[i % len(markers)],
            markersize=11 - 1.3 * i,
            lw=2.6 - 0.3 * i,
            label=name,
        )
    ax.axhline(1 / N_KEYS, color="grey", ls=":", label="chance")
    ax.axhline(0.9, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"evaluation length / training length ({train_len})")
    ax.set_ylabel("passkey accuracy")
    ax.set_ylim(-0.02, 1.04)
    ax.legend(loc="lower left")
    ax.set_title("Passkey retrieval beyond the training length")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--mults", default="1,4,16,64")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--long-samples", type=int, default=64)
    ap.add_argument(
        "--long-from", type=int, default=32, help="multiplier from which --long-samples applies"
    )
    ap.add_argument("--max-tokens", type=int, default=16384, help="tokens per evaluation batch")
    ap.add_argument("--models", default="rope,alibi,nope,bam,hsa")
    ap.add_argument("--bam-shape-init", default="linear", help="'linear' or a float > 0")
    ap.add_argument("--prior-lr-mult", type=float, default=10.0)
    ap.add_argument("--chunk-size", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument(
        "--gumbel", action="store_true", help="Gumbel noise on the HSA top-k in training"
    )
    ap.add_argument(
        "--extra-mults",
        default="",
        help="further multipliers, evaluated only for models at >= 0.9 on the last one",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from the JSON in --out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.replot:
        saved = json.loads((args.out / "passkey.json").read_text())
        plot(saved["results"], saved["train_len"], args.out / "passkey.png")
        return

    mults = [int(m) for m in args.mults.split(",")]
    extra = [int(m) for m in args.extra_mults.split(",") if m]
    results: dict[str, dict] = {}
    for name in args.models.split(","):
        model = build(name, args)
        n_params = sum(p.numel() for p in model.parameters())
        t0 = time.perf_counter()
        losses = train(
            model,
            name,
            args.train_len,
            args.steps,
            args.batch,
            args.lr,
            args.seed,
            args.prior_lr_mult if name in ("bam", "bam-ssmax") else 1.0,
        )
        train_s = time.perf_counter() - t0
        acc: dict[str, float] = {}
        t0 = time.perf_counter()
        todo, more = list(mults), list(extra)
        while todo:
            m = todo.pop(0)
            length = args.train_len * m
            n = args.long_samples if m >= args.long_from else args.samples
            acc[str(length)] = accuracy(model, length, n, 10_000 + length, args.max_tokens)
            print(f"  {name} @ {m}x ({length}): {acc[str(length)]:.3f}", flush=True)
            if not todo and more and acc[str(length)] >= 0.9:
                todo.append(more.pop(0))
        eval_s = time.perf_counter() - t0
        results[name] = {
            "accuracy": acc,
            "final_loss": sum(losses[-50:]) / len(losses[-50:]),
            "train_seconds": round(train_s, 1),
            "eval_seconds": round(eval_s, 1),
            "parameters": n_params,
            **describe(model),
        }
        print(name, {k: round(v, 3) for k, v in acc.items()}, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "task": "passkey retrieval, random filler, key at uniform depth",
        "train_len": args.train_len,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "seed": args.seed,
        "bam": {"shape_init": args.bam_shape_init, "prior_lr_mult": args.prior_lr_mult},
        "hsa": {
            "chunk_size": args.chunk_size,
            "top_k": args.top_k,
            "window": args.window,
            "gumbel_noise": args.gumbel,
        },
        "samples_per_length": args.samples,
        "long_samples": {"from_mult": args.long_from, "samples": args.long_samples},
        "chance": 1 / N_KEYS,
        "model": {"dim": args.dim, "heads": 4, "attention_layers": 2},
        "machine": "2-core CPU (shared)",
        "results": results,
    }
    (args.out / "passkey.json").write_text(json.dumps(payload, indent=2))

    plot(results, args.train_len, args.out / "passkey.png")
    print("wrote", args.out / "passkey.json")


if __name__ == "__main__":
    main()

"""Accuracy cost of OOMB's page-level sparse attention on a tiny model.

A tiny Llama (2 layers, hidden 64, 4 query / 2 KV heads) is first trained with ordinary
back-propagation on a copy task: a random block of ``--period`` tokens repeated to fill
``--seq`` tokens, so that predicting the later repeats needs attention to the earlier
ones (far-away pages). On held-out sequences of the same kind it then compares, for
several page budgets, the chunk-recurrent loss and gradients with page-level sparse
attention against exact chunk-recurrent training (which equals full back-propagation):
the loss difference, the relative gradient error and the gradient cosine.

Writes ``docs/benchmarks/lc-train-oomb/oomb_sparse.json`` and ``.png``.

    uv run python packages/lc-train/benchmarks/oomb_sparse.py
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-oomb"


def copy_batch(gen: torch.Generator, batch: int, seq: int, period: int, vocab: int):
    """Random blocks of ``period`` tokens repeated to ``seq`` tokens."""
    block = torch.randint(0, vocab, (batch, period), generator=gen)
    return block.repeat(1, -(-seq // period))[:, :seq]


def grads(model: torch.nn.Module) -> torch.Tensor:
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    model.zero_grad()
    return flat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--period", type=int, default=96)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--budgets", type=int, nargs="*", default=[3, 4, 6, 7, 8, 12, 16])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    torch.manual_seed(args.seed)
    vocab = 64
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=args.seq,
    )
    model = LlamaForCausalLM(cfg).float()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(args.seed)
    train_curve = []
    for step in range(args.steps):
        ids = copy_batch(gen, 4, args.seq, args.period, vocab)
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        train_curve.append(float(loss.detach()))
        if step % 25 == 0:
            print(f"train step {step}: loss {float(loss.detach()):.3f}", flush=True)
    model.zero_grad()
    test = copy_batch(
        torch.Generator().manual_seed(10_000 + args.seed), 2, args.seq, args.period, vocab
    )
    base = dict(chunk_size=args.chunk, page_size=args.page, block_tokens=args.page)
    exact = chunk_recurrent_backward(model, test, config=ChunkRecurrentConfig(**base))
    g_exact = grads(model)
    rows = []
    n_pages = args.seq // args.page
    for budget in args.budgets:
        res = chunk_recurrent_backward(
            model, test, config=ChunkRecurrentConfig(**base, page_budget=budget)
        )
        g = grads(model)
        row = {
            "page_budget": budget,
            "max_past_pages": n_pages - args.chunk // args.page,
            "loss": float(res.loss),
            "loss_diff_vs_exact": float(res.loss - exact.loss),
            "grad_rel_error": float((g - g_exact).norm() / g_exact.norm()),
            "grad_cosine": float(torch.nn.functional.cosine_similarity(g, g_exact, dim=0)),
        }
        rows.append(row)
        print(row, flush=True)
    result = {
        "machine": f"2-core CPU ({platform.machine()}, 1 torch thread), torch {torch.__version__}",
        "model": "Llama, 2 layers, hidden 64, 4 query / 2 KV heads, vocab 64, "
        + (f"{args.steps} AdamW steps on the copy task" if args.steps else "random init"),
        "config": vars(args),
        "train_loss_first_last": [train_curve[0], train_curve[-1]] if train_curve else None,
        "exact_loss": float(exact.loss),
        "rows": rows,
        "wall_s": time.time() - t0,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "oomb_sparse.json").write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    b = [r["page_budget"] for r in rows]
    ax[0].plot(b, [r["loss_diff_vs_exact"] for r in rows], marker="o")
    ax[0].set_xlabel("page budget (pages of past per chunk)")
    ax[0].set_ylabel("loss(sparse) - loss(exact)")
    ax[1].plot(b, [r["grad_rel_error"] for r in rows], marker="o")
    ax[1].set_xlabel("page budget")
    ax[1].set_ylabel("relative gradient error")
    ax[1].set_yscale("log")
    fig.suptitle(
        f"OOMB page-level sparse attention, copy task (seq {args.seq}, period {args.period}, "
        f"chunk {args.chunk}, page {args.page}); exact loss {float(exact.loss):.3f}",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(OUT / "oomb_sparse.png", dpi=110)
    print(f"wrote {OUT}/oomb_sparse.json and .png")


if __name__ == "__main__":
    main()

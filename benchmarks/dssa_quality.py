"""DSSA vs dense attention on SmolLM2-135M-Instruct: NIAH accuracy and prefill time.

Runs dense and DSSA side by side on the same items (one process, same machine) and
writes ``docs/benchmarks/lc-attention-dssa/quality.json`` (and ``quality.png``).

    uv run python benchmarks/dssa_quality.py --lengths 2048 4096 --n 4
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time

import torch
from tqdm import tqdm

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"


def _ids(tok, length: int, seed: int):
    from lc_evals import generate, render_prompt

    item = generate("niah_single", n=1, length=length, seed=seed, tokenizer=tok)[0]
    msgs = [{"role": "user", "content": render_prompt(item)}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return tok(text, return_tensors="pt").input_ids, item.answers[0]


def _answer(model, tok, ids, max_new: int) -> tuple[str, float]:
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_new, do_sample=False)
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True), time.perf_counter() - t0


def _prefill(model, ids) -> float:
    t0 = time.perf_counter()
    with torch.no_grad():
        model(ids, logits_to_keep=1)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--n", type=int, default=4, help="NIAH items per length")
    ap.add_argument("--max-new", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "quality.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model

    model, tok = load_model()
    cfg = DSSAConfig.small()
    rows = []
    for length in args.lengths:
        hits = {"dense": 0, "dssa": 0}
        times = {"dense": 0.0, "dssa": 0.0}
        prefill = {"dense": 0.0, "dssa": 0.0}
        for seed in tqdm(range(args.n), desc=f"len {length}"):
            ids, answer = _ids(tok, length, seed)
            for mode in ("dense", "dssa"):
                if mode == "dssa":
                    handle = enable_dssa(model, cfg)
                try:
                    text, sec = _answer(model, tok, ids, args.max_new)
                    prefill[mode] += _prefill(model, ids)
                finally:
                    if mode == "dssa":
                        handle.__exit__(None, None, None)
                hits[mode] += int(answer in text)
                times[mode] += sec
        rows.append(
            {
                "length": length,
                "tokens": int(ids.shape[1]),
                "n": args.n,
                "acc_dense": hits["dense"] / args.n,
                "acc_dssa": hits["dssa"] / args.n,
                "prefill_s_dense": prefill["dense"] / args.n,
                "prefill_s_dssa": prefill["dssa"] / args.n,
                "generate_s_dense": times["dense"] / args.n,
                "generate_s_dssa": times["dssa"] / args.n,
            }
        )
        print(rows[-1])
    result = {
        "model": "SmolLM2-135M-Instruct (embedded GGUF, float32)",
        "task": "niah_single (lc_evals.generate), chat template, greedy",
        "config": cfg.__dict__,
        "machine": f"{platform.processor() or platform.machine()}, {args.threads} threads, CPU",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    xs = [r["length"] for r in rows]
    ax.plot(xs, [r["acc_dense"] for r in rows], "o-", label="dense")
    ax.plot(xs, [r["acc_dssa"] for r in rows], "s--", label="DSSA (small preset)")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("NIAH accuracy")
    ax.set_ylim(-0.05, 1.05)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

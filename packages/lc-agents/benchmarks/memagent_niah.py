"""MemAgent over the embedded SmolLM2-135M-Instruct on lc-evals NIAH (7-digit values).

Variants, side by side on the same items:

* ``score``: the default configuration: a memory of verbatim sentences kept by the
  model's question likelihood (key-aware), candidates pre-filtered by question words;
* ``score_all``: the same without the question-word filter: the model scores every
  sentence of every chunk;
* ``generate``: the previous default: copy-constrained generated memory (two spans);
* ``plain``: MemAgent with free (prompted) memory updates and answers;
* ``one_pass``: the same model reading the whole document in one prompt (only up to
  ``--one-pass-max`` tokens).

Tasks: ``niah_single`` (one needle in essay text) and ``niah_multikey`` (the needle plus
3 distractor needles with other keys). Items are deterministic in (task, length, seed)
and item ``i`` does not depend on how many are generated, so results are cached per item
in the JSON: a rerun skips the items already measured with the same configuration, and a
later run with more ``--items`` extends the cells instead of starting over.

``--profile`` measures peak resident memory and tokens/second of one MemAgent run per
(variant, length), each in a fresh process, side by side in the same invocation.

Writes ``docs/benchmarks/lc-agents/memagent_niah.json``, ``memagent_niah.png`` (heat map)
and ``memagent_profile.png``.

    uv run python packages/lc-agents/benchmarks/memagent_niah.py --lengths 4096 --items 5
    uv run python packages/lc-agents/benchmarks/memagent_niah.py --profile \\
        --lengths 16384 131072 --variants score score_all
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import replace

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents"
JSON = OUT / "memagent_niah.json"
TASKS = {"niah_single": {}, "niah_multikey": {"num_distractors": 3}}
VARIANTS = ["score", "score_all", "generate", "plain", "one_pass"]
ONE_PASS_PROMPT = "{context}\n\n{question} Answer with the number only."


def load_json(path: pathlib.Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def config_for(variant: str):
    from lc_agents.memagent import MemAgentConfig

    base = MemAgentConfig()
    return {
        "score": base,
        "score_all": replace(base, min_overlap=0),
        "generate": replace(base, memory_mode="generate"),
        "plain": MemAgentConfig.plain(),
    }[variant]


def variant_hash(variant: str) -> str:
    """What a cached item must match: the variant's configuration (or one-pass prompt)."""
    if variant == "one_pass":
        blob = {"one_pass": ONE_PASS_PROMPT, "max_tokens": 16}
    else:
        blob = config_for(variant).fingerprint_fields()
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def items_for(task: str, n: int, length: int, seed: int, tokenizer):
    import lc_evals

    return lc_evals.generate(
        task,
        n=n,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack="essay",
        value_kind="number",
        **TASKS[task],
    )


def one_pass(backend, item) -> str:
    prompt = ONE_PASS_PROMPT.format(context=item.context, question=item.question)
    return backend.chat([{"role": "user", "content": prompt}], max_tokens=16)


def summarize(cell: dict) -> None:
    items = cell["items"].values()
    cell["n"] = len(items)
    cell["correct"] = sum(it["ok"] for it in items)
    cell["seconds_per_item"] = sum(it["seconds"] for it in items) / max(len(items), 1)


def migrate(data: dict) -> None:
    """Earlier layouts kept an ordered answer list per cell; the old ``copy`` is ``generate``."""
    rows = data.get("accuracy", {})
    for key in list(rows):
        cell = rows[key]
        if "items" in cell:
            continue
        task, length, variant = key.split("/")
        new_variant = "generate" if variant == "copy" else variant
        answers = cell.get("answers", [])
        cell = {
            "hash": variant_hash(new_variant),
            "items": {
                str(i): {**a, "seconds": cell.get("seconds_per_item", 0.0)}
                for i, a in enumerate(answers)
            },
        }
        if variant == "copy":
            cell["note"] = "measured as 'copy' before memory_mode existed (same decoding)"
        del rows[key]
        if answers:
            summarize(cell)
            rows[f"{task}/{length}/{new_variant}"] = cell


def n_items(args, length: int) -> int:
    return args.items_128k if length >= 131072 else args.items


def accuracy(args) -> None:
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.memagent import MemAgent
    from lc_agents.memagent.checkpoint import atomic_write_json

    torch.set_num_threads(args.threads)
    backend = LocalBackend("smollm2-135m-instruct")
    agents = {v: MemAgent(backend, config_for(v)) for v in args.variants if v != "one_pass"}
    data = load_json(JSON)
    migrate(data)
    data["machine"] = args.machine
    data["model"] = "SmolLM2-135M-Instruct (embedded, fp32, CPU)"
    data["settings"] = {
        "haystack": "essay",
        "value_kind": "number (7 digits)",
        "seed": args.seed,
        "chunk_tokens": 1024,
        "memory_tokens": 64,
        "threads": args.threads,
    }
    data.pop("config", None)
    rows = data.setdefault("accuracy", {})
    for length in args.lengths:
        n = n_items(args, length)
        for task in args.tasks:
            todo = []
            for variant in args.variants:
                if variant == "one_pass" and length > args.one_pass_max:
                    continue
                key = f"{task}/{length}/{variant}"
                cell = rows.get(key)
                if cell is None or cell.get("hash") != variant_hash(variant):
                    if cell is not None:
                        print(f"{key}: configuration changed, cached items dropped", flush=True)
                    cell = rows[key] = {"hash": variant_hash(variant), "items": {}}
                missing = [i for i in range(n) if str(i) not in cell["items"]]
                if missing:
                    todo.append((variant, key, missing))
            if not todo:
                continue
            items = items_for(task, max(max(m) for _, _, m in todo) + 1, length, args.seed,
                              backend.tokenizer)  # fmt: skip
            for variant, key, missing in todo:
                cell = rows[key]
                for i in missing:
                    item = items[i]
                    t0 = time.perf_counter()
                    if variant == "one_pass":
                        answer = one_pass(backend, item)
                    else:
                        answer = agents[variant].run(item.context, item.question).answer
                    ok = item.answers[0] in answer
                    cell["items"][str(i)] = {
                        "expected": item.answers[0],
                        "answer": answer[:80],
                        "ok": ok,
                        "seconds": time.perf_counter() - t0,
                    }
                    summarize(cell)
                    atomic_write_json(JSON, data)
                    print(f"{key}: {cell['correct']}/{cell['n']}", flush=True)
    plot(data)


def profile_one(variant: str, item_path: str, threads: int) -> dict:
    """One timed run in this (fresh) process; the item was generated by the parent, so
    the peak RSS is the model, the document and the run, not the document generator."""
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.memagent import MemAgent

    torch.set_num_threads(threads)
    item = json.loads(pathlib.Path(item_path).read_text())
    backend = LocalBackend("smollm2-135m-instruct")
    agent = MemAgent(backend, config_for(variant))
    agent.run("A warm-up sentence about nothing.", item["question"])  # lazy tables, untimed
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = agent.run(item["context"], item["question"])
    seconds = time.perf_counter() - t0
    scorer = getattr(agent, "_scorer", None)
    return {
        "variant": variant,
        "length": item["length"],
        "document_tokens": result.document_tokens,
        "chunks": result.n_chunks,
        "sentences_scored": len(scorer._cache) if scorer is not None else None,
        "peak_rss_mib_before_run": rss_before / 1024,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
        "tokens_per_second": result.document_tokens / seconds,
        "correct": item["answer"] in result.answer,
    }


def profile(args) -> None:
    import tempfile

    from lc_agents.memagent.checkpoint import atomic_write_json
    from lc_agents.models import load_tokenizer

    tokenizer = load_tokenizer("smollm2-135m-instruct")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="memagent-profile-"))
    for length in args.lengths:
        item = items_for("niah_multikey", 1, length, args.seed, tokenizer)[0]
        blob = {"context": item.context, "question": item.question, "length": length}
        blob["answer"] = item.answers[0]
        (tmp / f"{length}.json").write_text(json.dumps(blob))
    try:
        for variant in [v for v in args.variants if v not in ("one_pass", "plain")]:
            for length in args.lengths:
                item_path = str(tmp / f"{length}.json")
                cmd = [sys.executable, __file__, "--_profile-one", variant, item_path]
                cmd += ["--threads", str(args.threads)]
                run = subprocess.run(cmd, check=True, capture_output=True, text=True)
                row = json.loads(run.stdout.strip().splitlines()[-1])
                data = load_json(JSON)
                migrate(data)
                data.setdefault("profile", {})[f"{variant}/{length}"] = row
                data["profile_machine"] = args.machine
                atomic_write_json(JSON, data)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plot(load_json(JSON))


def plot(data: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    acc = data.get("accuracy", {})
    lengths = sorted({int(k.split("/")[1]) for k in acc})
    variants = [v for v in VARIANTS if any(k.endswith("/" + v) for k in acc)]
    if lengths and variants:
        fig, axes = plt.subplots(1, 2, figsize=(11, 0.6 * len(variants) + 2.2), sharey=True)
        for ax, task in zip(axes, TASKS, strict=True):
            grid = np.full((len(variants), len(lengths)), np.nan)
            for r, v in enumerate(variants):
                for c, length in enumerate(lengths):
                    cell = acc.get(f"{task}/{length}/{v}")
                    if cell and cell.get("n"):
                        grid[r, c] = cell["correct"] / cell["n"]
                        ax.text(c, r, f"{cell['correct']}/{cell['n']}", ha="center",
                                va="center", fontsize=9)  # fmt: skip
                    else:
                        ax.text(c, r, "-", ha="center", va="center", color="grey")
            ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
            ax.set_xticks(range(len(lengths)), [f"{n // 1024}K" for n in lengths])
            ax.set_yticks(range(len(variants)), variants)
            ax.set_title(task)
            ax.set_xlabel("document tokens")
        fig.suptitle("MemAgent on SmolLM2-135M-Instruct, lc-evals NIAH (correct / items)")
        fig.tight_layout()
        fig.savefig(OUT / "memagent_niah.png", dpi=120)
        plt.close(fig)

    prof = data.get("profile", {})
    if prof:
        pv = sorted({k.split("/")[0] for k in prof}, key=VARIANTS.index)
        pl = sorted({int(k.split("/")[1]) for k in prof})
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
        width = 0.8 / len(pv)
        for j, v in enumerate(pv):
            rows = [prof.get(f"{v}/{n}") for n in pl]
            x = np.arange(len(pl)) + j * width
            b1 = a1.bar(x, [r["peak_rss_mib"] if r else 0 for r in rows], width, label=v)
            b2 = a2.bar(x, [r["tokens_per_second"] if r else 0 for r in rows], width, label=v)
            a1.bar_label(b1, fmt="%.0f")
            a2.bar_label(b2, fmt="%.0f")
        for ax, title in ((a1, "peak RSS (MiB)"), (a2, "document tokens / second")):
            ax.set_xticks(np.arange(len(pl)) + width * (len(pv) - 1) / 2,
                          [f"{n // 1024}K" for n in pl])  # fmt: skip
            ax.set_title(title)
            ax.set_xlabel("document tokens")
            ax.legend()
        fig.suptitle("MemAgent, one run per length in a fresh process (multi-key item)")
        fig.tight_layout()
        fig.savefig(OUT / "memagent_profile.png", dpi=120)
        plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 65536, 131072])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--variants", nargs="+", default=["score", "one_pass"], choices=VARIANTS)
    p.add_argument("--items", type=int, default=20, help="items per cell below 128K")
    p.add_argument("--items-128k", type=int, default=10, help="items per cell at 128K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--one-pass-max", type=int, default=16384)
    p.add_argument("--machine", default=f"{platform.machine()} CPU, 2 cores (shared)")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--plot-only", action="store_true")
    p.add_argument("--_profile-one", nargs=2, dest="profile_one", default=None)
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.profile_one is not None:
        variant, item_path = args.profile_one
        print(json.dumps(profile_one(variant, item_path, args.threads)))
    elif args.plot_only:
        plot(load_json(JSON))
    elif args.profile:
        profile(args)
    else:
        accuracy(args)


if __name__ == "__main__":
    main()

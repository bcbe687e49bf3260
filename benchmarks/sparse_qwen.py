"""Sparse attention on Qwen2.5-Coder-0.5B-Instruct: DSSA and LycheeDecode against dense.

Quality (``quality``): a RULER subset from lc-evals (``niah_single``, ``niah_multikey``,
``variable_tracking``, ``common_words``), chat template plus a per-task answer prefix,
greedy decoding, scored by each task's own scorer. For every item, in one process:

- ``dense``: the model's SDPA prefills the prompt into a KV cache and decodes;
- ``lychee``: LycheeDecode decodes from the same dense prefill (LycheeDecode prefills
  densely by design), with the role map learned for this model (``lychee_train.py
  --model qwen2.5-coder-0.5b-instruct``) and ``topk = context / 8`` positions per
  sparse head;
- ``dssa``: ``DSSAConfig.training_free(topk_fraction=1/8)`` prefills and decodes (every
  query attends to at most max(16, 1/8 of its blocks): 1/8 of the context from 8K on).

Perplexity on real text (``--ppl-texts``): the last windows of Python's documentation
(``pydoc_data.topics``), next-token NLL over the second half, dense vs DSSA (LycheeDecode
changes decode steps only).

Every finished item is appended to ``--records`` (JSON lines, one per item and method),
so a stopped run resumes where it was. ``summary`` writes the table (accuracy, Wilson 95%
intervals, fraction of dense) to ``sparse_qwen_quality.json`` / ``.png``.

    uv run python benchmarks/sparse_qwen.py quality --lengths 8192 --n 10
    uv run python benchmarks/sparse_qwen.py summary
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import sys
import time
from typing import Any

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from dssa_quality import _nll, doc_window
from lychee_common import chat_ids

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa
from lc_attention.lychee import PreallocatedCache, RoleMap, enable_lychee
from lc_evals.report import wilson_interval

MODEL = "qwen2.5-coder-0.5b-instruct"
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs/benchmarks/lc-attention-qwen"
ROLES = ROOT / "docs/benchmarks/lc-attention-lychee/qwen2.5_coder_0.5b_instruct_roles.json"
TASKS = ("niah_single", "niah_multikey", "variable_tracking", "common_words")
METHODS = ("dense", "lychee", "dssa")
BUDGET = 1 / 8
MAX_NEW = {"niah_single": 12, "niah_multikey": 12, "variable_tracking": 24, "common_words": 48}


def answer_prefix(item: Any) -> str:
    """The sentence the reply starts with, so a small model answers at once (as RULER)."""
    if item.task.startswith("niah"):
        key = item.metadata["keys"][0]
        return f"The special magic number for {key} mentioned in the text above is"
    if item.task == "variable_tracking":
        return f"The variables assigned the value {item.metadata['value']} are:"
    return "The 10 most common words in the list are:"


def load(device: str) -> tuple[Any, Any]:
    """The model on ``device``: float32 on the CPU, bfloat16 on CUDA."""
    from lc_agents.models import load_model

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model, tok = load_model(MODEL, dtype=dtype)
    return model.to(device), tok


def dssa_config() -> DSSAConfig:
    """The DSSA setting measured: training-free spans, a budget of 1/8 of the blocks."""
    return DSSAConfig.training_free(topk_fraction=BUDGET)


def greedy(model: Any, cache: Any, logits: torch.Tensor, steps: int, eos: set[int]) -> list[int]:
    """Greedy tokens from the last prefill ``logits [1, V]`` over ``cache``."""
    out: list[int] = []
    nxt = logits.argmax(-1, keepdim=True)
    with torch.no_grad():
        for _ in range(steps):
            t = int(nxt)
            out.append(t)
            if t in eos:
                break
            nxt = model(nxt, cache=cache, use_cache=True).logits[:, -1].argmax(-1, True)
    return out


def prefill(model: Any, ids: torch.Tensor, cache: Any, chunk: int) -> torch.Tensor:
    """Feed ``ids [1, T]`` into ``cache`` ``chunk`` tokens per pass; last logits ``[1, V]``."""
    logits = None
    with torch.no_grad():
        for s in range(0, ids.shape[1], chunk):
            out = model(ids[:, s : s + chunk], cache=cache, use_cache=True,
                        logits_to_keep=1)  # fmt: skip
            logits = out.logits[:, -1]
    assert logits is not None
    return logits


def run_item(model: Any, tok: Any, rm: RoleMap, task: str, length: int, seed: int,
             chunk: int, methods: tuple[str, ...]) -> list[dict[str, Any]]:  # fmt: skip
    """All methods on one item; one record per method."""
    from lc_evals import generate, render_prompt, score

    item = generate(task, n=1, length=length, seed=seed, tokenizer=tok)[0]
    ids = chat_ids(tok, render_prompt(item), answer_prefix(item)).to(model.device)
    steps = MAX_NEW[task]
    eos = {tok.eos_token_id, *(tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]))}
    recs = []

    def record(method: str, toks: list[int], seconds: float) -> None:
        text = tok.decode(toks, skip_special_tokens=True)
        recs.append({"task": task, "length": length, "seed": seed, "method": method,
                     "tokens": ids.shape[1], "answers": list(item.answers), "reply": text,
                     "score": score(item, text), "seconds": round(seconds, 2)})  # fmt: skip

    cache = PreallocatedCache(config=model.config, capacity=ids.shape[1] + steps + 1)
    t0 = time.perf_counter()
    logits = prefill(model, ids, cache, chunk)
    t_pre = time.perf_counter() - t0
    if "dense" in methods:
        t0 = time.perf_counter()
        toks = greedy(model, cache, logits, steps, eos)
        record("dense", toks, t_pre + time.perf_counter() - t0)
        extra = cache.get_seq_length() - ids.shape[1]
        if extra:
            cache.crop(-extra)  # back to the prompt for LycheeDecode
    if "lychee" in methods:
        t0 = time.perf_counter()
        with enable_lychee(model, rm, topk=max(1, int(ids.shape[1] * BUDGET))):
            toks = greedy(model, cache, logits, steps, eos)
        record("lychee", toks, t_pre + time.perf_counter() - t0)
    del cache
    if "dssa" in methods:
        t0 = time.perf_counter()
        with enable_dssa(model, dssa_config()):
            cache = PreallocatedCache(config=model.config, capacity=ids.shape[1] + steps + 1)
            toks = greedy(model, cache, prefill(model, ids, cache, chunk), steps, eos)
        record("dssa", toks, time.perf_counter() - t0)
    return recs


def run_ppl(model: Any, tok: Any, length: int, index: int) -> list[dict[str, Any]]:
    """Dense and DSSA NLL over the second half of documentation window ``-1 - index``."""
    ids = doc_window(tok, length, -1 - index).to(model.device)
    recs = []
    for method in ("dense", "dssa"):
        t0 = time.perf_counter()
        if method == "dense":
            nll = _nll(model, ids, chunk=2048)
        else:
            with enable_dssa(model, dssa_config()):
                nll = _nll(model, ids, chunk=2048)
        half = nll[nll.shape[0] // 2 :]
        recs.append({"task": "ppl_docs", "length": length, "seed": index, "method": method,
                     "nll_second_half": float(half.mean()), "nll_all": float(nll.mean()),
                     "seconds": round(time.perf_counter() - t0, 2)})  # fmt: skip
    return recs


def load_records(path: pathlib.Path) -> list[dict[str, Any]]:
    """Records of earlier runs (a torn last line from a killed run is ignored)."""
    if not path.exists():
        return []
    recs = []
    for line in path.read_text().splitlines():
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return recs


def _append(path: pathlib.Path, recs: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


def quality(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    done = {
        (r["task"], r["length"], r["seed"], r["method"])
        for r in load_records(args.records)
        if r["task"] != "speed"
    }
    model, tok = load(args.device)
    rm = RoleMap.load(args.roles)
    plan = [(t, n, s) for n in args.lengths for s in range(args.n) for t in args.tasks]
    t_start = time.perf_counter()
    for i, (task, length, seed) in enumerate(plan):
        todo = tuple(m for m in args.methods if (task, length, seed, m) not in done)
        if not todo:
            continue
        recs = run_item(model, tok, rm, task, length, seed, args.chunk, todo)
        _append(args.records, recs)
        el = time.perf_counter() - t_start
        line = " ".join(f"{r['method']}={r['score']:.2f}" for r in recs)
        print(f"[{i + 1}/{len(plan)} {el:.0f}s] {task} {length} seed {seed}: {line}", flush=True)
    for length in args.lengths:
        for j in range(args.ppl_texts):
            if ("ppl_docs", length, j, "dssa") in done:
                continue
            recs = run_ppl(model, tok, length, j)
            _append(args.records, recs)
            print(f"ppl {length} #{j}: " + " ".join(
                f"{r['method']}={math.exp(r['nll_second_half']):.3f}" for r in recs), flush=True)  # fmt: skip


def summarize(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy per (length, task, method) on the items every method finished."""
    rows = []
    lengths = sorted({r["length"] for r in recs})
    for length in lengths:
        for task in (*TASKS, "all"):
            sel = [r for r in recs if r["length"] == length and r["task"] in TASKS
                   and (task == "all" or r["task"] == task)]  # fmt: skip
            by_item: dict[tuple[str, int], dict[str, float]] = {}
            for r in sel:
                by_item.setdefault((r["task"], r["seed"]), {})[r["method"]] = r["score"]
            full = [v for v in by_item.values() if all(m in v for m in METHODS)]
            if not full:
                continue
            dense = sum(v["dense"] for v in full)
            for m in METHODS:
                k = sum(v[m] for v in full)
                lo, hi = wilson_interval(k, len(full))
                rows.append({"length": length, "task": task, "method": m, "n": len(full),
                             "accuracy": k / len(full), "ci95": [lo, hi],
                             "fraction_of_dense": k / dense if dense else None})  # fmt: skip
        ppl = {}
        for m in ("dense", "dssa"):
            v = [r["nll_second_half"] for r in recs
                 if r["task"] == "ppl_docs" and r["length"] == length and r["method"] == m]  # fmt: skip
            if v:
                ppl[m] = {"texts": len(v), "ppl_second_half": math.exp(sum(v) / len(v))}
        if ppl:
            rows.append({"length": length, "task": "ppl_docs", **ppl})
    return {
        "speed": speed_rows(recs),
        "model": f"{MODEL} (embedded GGUF, float32)",
        "machine": f"{platform.machine()}, CPU",
        "budget": "1/8 of the context (DSSA: of the blocks; LycheeDecode: topk positions)",
        "dssa_config": dssa_config().__dict__,
        "rows": rows,
    }


def speed_rows(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per length: TTFT (process CPU time, one thread), decode speed and peak memory of
    dense, DSSA and LycheeDecode, with the ratios to dense and the no-attention floor."""
    by = {(r["mode"], r["length"]): r for r in recs if r["task"] == "speed"}
    rows = []
    for length in sorted({n for _, n in by}):
        d, x, z = (by.get((m, length)) for m in ("dense", "dssa", "no_attention"))
        if d is None:
            continue
        row: dict[str, Any] = {
            "length": length,
            "dense_ttft_cpu_s": d["ttft_cpu_s"],
            "dense_decode_tok_s": d["decode_tok_per_s_cpu"],
            "lychee_decode_tok_s": d["lychee_decode_tok_per_s_cpu"],
            "lychee_decode_speedup": d["lychee_decode_tok_per_s_cpu"] / d["decode_tok_per_s_cpu"],
            "dense_peak_rss_mib_over_model": d["peak_rss_mib_dense_only"],
        }
        if x is not None:
            row.update({
                "dssa_ttft_cpu_s": x["ttft_cpu_s"],
                "dssa_prefill_speedup": d["ttft_cpu_s"] / x["ttft_cpu_s"],
                "dssa_decode_tok_s": x["decode_tok_per_s_cpu"],
                "dssa_decode_speedup": x["decode_tok_per_s_cpu"] / d["decode_tok_per_s_cpu"],
                "dssa_peak_rss_mib_over_model": x["peak_rss_mib_over_model"],
            })  # fmt: skip
        if z is not None:  # what is left when attention costs nothing
            row.update({
                "no_attention_ttft_cpu_s": z["ttft_cpu_s"],
                "prefill_speedup_bound": d["ttft_cpu_s"] / z["ttft_cpu_s"],
                "no_attention_decode_tok_s": z["decode_tok_per_s_cpu"],
                "decode_speedup_bound": z["decode_tok_per_s_cpu"] / d["decode_tok_per_s_cpu"],
            })  # fmt: skip
        rows.append(row)
    return rows


def speed_markdown(rows: list[dict[str, Any]]) -> str:
    """The speed rows as a markdown table (ratios to dense; bound: attention free)."""
    f = lambda r, k, fmt: format(r[k], fmt) if k in r else "-"  # noqa: E731
    x = lambda r, k: f"{r[k]:.2f}x" if k in r else "-"  # noqa: E731
    lines = [
        "| context | dense TTFT (CPU s) | DSSA TTFT | DSSA prefill speed-up | bound | "
        "dense decode (tok/s) | DSSA decode | LycheeDecode decode | bound | "
        "peak RSS over model, dense / DSSA (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['length'] // 1024}K | {f(r, 'dense_ttft_cpu_s', '.0f')} | "
            f"{f(r, 'dssa_ttft_cpu_s', '.0f')} | {x(r, 'dssa_prefill_speedup')} | "
            f"{x(r, 'prefill_speedup_bound')} | {f(r, 'dense_decode_tok_s', '.2f')} | "
            f"{f(r, 'dssa_decode_tok_s', '.2f')} ({x(r, 'dssa_decode_speedup')}) | "
            f"{f(r, 'lychee_decode_tok_s', '.2f')} ({x(r, 'lychee_decode_speedup')}) | "
            f"{x(r, 'decode_speedup_bound')} | "
            f"{f(r, 'dense_peak_rss_mib_over_model', 'd')} / "
            f"{f(r, 'dssa_peak_rss_mib_over_model', 'd')} |"
        )
    return "\n".join(lines)


def markdown(summary: dict[str, Any]) -> str:
    """The accuracy rows as a markdown table."""
    lines = [
        "| length | task | method | n | accuracy (95% CI) | of dense |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        if r["task"] == "ppl_docs":
            continue
        frac = "" if r["fraction_of_dense"] is None else f"{100 * r['fraction_of_dense']:.0f}%"
        lo, hi = r["ci95"]
        lines.append(f"| {r['length']} | {r['task']} | {r['method']} | {r['n']} | "
                     f"{100 * r['accuracy']:.0f}% ({100 * lo:.0f}-{100 * hi:.0f}) | {frac} |")  # fmt: skip
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary["rows"] if r["task"] != "ppl_docs"]
    lengths = sorted({r["length"] for r in rows})
    if not lengths:
        return
    fig, axes = plt.subplots(1, len(lengths), figsize=(4.5 * len(lengths), 3.4), squeeze=False)
    for ax, length in zip(axes[0], lengths, strict=True):
        tasks = [t for t in (*TASKS, "all") if any(r["task"] == t and r["length"] == length
                                                    for r in rows)]  # fmt: skip
        for j, m in enumerate(METHODS):
            xs, ys, errs = [], [], [[], []]
            for i, t in enumerate(tasks):
                r = next(r for r in rows if r["length"] == length and r["task"] == t
                         and r["method"] == m)  # fmt: skip
                xs.append(i + (j - 1) * 0.25)
                ys.append(r["accuracy"])
                errs[0].append(r["accuracy"] - r["ci95"][0])
                errs[1].append(r["ci95"][1] - r["accuracy"])
            ax.bar(xs, ys, 0.25, yerr=errs, capsize=2, label=m, color=f"C{j}")
        ax.set_xticks(range(len(tasks)), [t.replace("_", "\n") for t in tasks], fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Qwen2.5-Coder-0.5B, {length // 1024}K tokens", fontsize=9)
        ax.set_ylabel("accuracy (95% CI)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_speed(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    """Speed-ups over dense per context length, beside the no-attention bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        return
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    series = {
        "prefill": [("DSSA", "dssa_prefill_speedup"), ("bound", "prefill_speedup_bound")],
        "decode step": [("DSSA", "dssa_decode_speedup"), ("LycheeDecode", "lychee_decode_speedup"),
                        ("bound", "decode_speedup_bound")],
    }  # fmt: skip
    for ax, (title, cols) in zip(axes, series.items(), strict=True):
        for j, (label, key) in enumerate(cols):
            xs = [i + (j - 1) * 0.25 for i in range(len(rows))]
            ax.bar(xs, [r.get(key, 0.0) for r in rows], 0.25, label=label,
                   color="0.7" if label == "bound" else f"C{j + 1}")  # fmt: skip
        ax.axhline(1.0, color="C0", lw=1, label="dense")
        ax.set_xticks(range(len(rows)), [f"{r['length'] // 1024}K" for r in rows])
        ax.set_ylabel("speed-up over dense (CPU time)")
        ax.set_title(f"Qwen2.5-Coder-0.5B {title}, 1 thread", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summary_cmd(args: argparse.Namespace) -> None:
    s = summarize(load_records(args.records))
    out = args.records.parent / "sparse_qwen_quality.json"
    out.write_text(json.dumps(s, indent=1))
    plot(s, out.with_suffix(".png"))
    plot_speed(s["speed"], out.with_name("sparse_qwen_speed.png"))
    print(markdown(s))
    print()
    print(speed_markdown(s["speed"]))
    for r in s["rows"]:
        if r["task"] == "ppl_docs":
            print(r)


class _Clock:
    """A ``generate()`` streamer that stamps wall and process CPU time at every put
    (the first put is the prompt, each later one a new token)."""

    def __init__(self) -> None:
        self.stamps: list[tuple[float, float]] = []

    def put(self, value: torch.Tensor) -> None:
        if value.is_cuda:
            torch.cuda.synchronize()
        self.stamps.append((time.perf_counter(), time.process_time()))

    def end(self) -> None:
        pass


def _timed_generate(model: Any, ids: torch.Tensor, cache: Any, new: int) -> dict[str, float]:
    """TTFT and decode speed of ``generate()`` (greedy, exactly ``new`` tokens)."""
    clock = _Clock()
    w0, c0 = time.perf_counter(), time.process_time()
    with torch.no_grad():
        model.generate(ids, cache=cache, max_new_tokens=new, min_new_tokens=new,
                       do_sample=False, streamer=clock, pad_token_id=0)  # fmt: skip
    (w1, c1), (wn, cn) = clock.stamps[1], clock.stamps[-1]
    steps = len(clock.stamps) - 2
    return {"ttft_wall_s": w1 - w0, "ttft_cpu_s": c1 - c0,
            "decode_tok_per_s_wall": steps / (wn - w1), "decode_tok_per_s_cpu": steps / (cn - c1),
            "decode_steps": steps}  # fmt: skip


def _rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _register_no_attention() -> None:
    """An attention function that returns zeros: the model's cost without attention,
    the floor no sparse attention can go below (a timing probe, not a model)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def none(module: Any, query: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[Any, None]:
        return query.new_zeros(query.transpose(1, 2).shape), None

    AttentionInterface.register("lc_no_attention", none)
    AttentionMaskInterface.register("lc_no_attention", sdpa_mask)


def speed_worker(args: argparse.Namespace) -> None:
    """One process per (mode, length), so each peak memory is its own. ``dense`` also
    decodes with LycheeDecode over its own prefilled cache (LycheeDecode's prefill is
    dense), so the two decode speeds come from one cache in one process."""
    torch.set_num_threads(args.threads)
    model, tok = load(args.device)
    with torch.no_grad():  # touch the weights before the baseline
        model(torch.zeros(1, 16, dtype=torch.long, device=model.device))
    base = _rss_mib()
    ids = doc_window(tok, args.length - args.new, -1).to(model.device)
    cache = PreallocatedCache(config=model.config, capacity=ids.shape[1] + args.new + 1)
    res: dict[str, Any] = {"mode": args.mode, "length": args.length, "prompt": ids.shape[1],
                           "threads": args.threads}  # fmt: skip
    if args.mode == "dssa":
        with enable_dssa(model, dssa_config()):
            res.update(_timed_generate(model, ids, cache, args.new))
    elif args.mode == "no_attention":
        _register_no_attention()
        previous = model.config._attn_implementation
        model.set_attn_implementation("lc_no_attention")
        res.update(_timed_generate(model, ids, cache, args.new))
        model.set_attn_implementation(previous)
    else:
        res.update(_timed_generate(model, ids, cache, args.new))
        res["peak_rss_mib_dense_only"] = round(_rss_mib() - base)
        cache.crop(
            -(cache.get_seq_length() - ids.shape[1] + 1)
        )  # keep all but the last prompt token
        rm = RoleMap.load(args.roles)
        with enable_lychee(model, rm, topk=max(1, int(ids.shape[1] * BUDGET))):
            lyc = _timed_generate(model, ids, cache, args.new + 1)
        res["lychee_decode_tok_per_s_wall"] = lyc["decode_tok_per_s_wall"]
        res["lychee_decode_tok_per_s_cpu"] = lyc["decode_tok_per_s_cpu"]
    if args.device == "cuda":
        res["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    res["model_rss_mib"] = round(base)
    res["peak_rss_mib_over_model"] = round(_rss_mib() - base)
    print(json.dumps(res), flush=True)


def speed(args: argparse.Namespace) -> None:
    """Run the workers in turn (DSSA, dense, no attention, per length); results appended to
    ``--records`` as ``speed`` rows (a finished (mode, length) is not run again)."""
    import subprocess

    done = {
        (r["mode"], r["length"]) for r in load_records(args.records) if r.get("task") == "speed"
    }
    for length in args.lengths:
        for mode in ("dssa", "dense", "no_attention"):
            if (mode, length) in done:
                continue
            cmd = [sys.executable, __file__, "speed-worker", "--mode", mode, "--length",
                   str(length), "--new", str(args.new), "--threads", str(args.threads),
                   "--roles", str(args.roles), "--device", args.device]  # fmt: skip
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res = json.loads(out.strip().splitlines()[-1])
            _append(args.records, [{"task": "speed", **res}])
            print(json.dumps(res), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quality", help="run (or resume) the quality items")
    q.add_argument("--lengths", type=int, nargs="+", default=[8192])
    q.add_argument("--n", type=int, default=10, help="items per task and length")
    q.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    q.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    q.add_argument("--ppl-texts", type=int, default=0)
    q.add_argument("--chunk", type=int, default=4096, help="prefill tokens per forward pass")
    q.add_argument("--threads", type=int, default=2)
    q.add_argument("--roles", type=pathlib.Path, default=ROLES)
    sp = sub.add_parser("speed", help="TTFT, decode speed and memory of generate()")
    sp.add_argument("--lengths", type=int, nargs="+", default=[16384, 32768])
    w = sub.add_parser("speed-worker", help=argparse.SUPPRESS)
    w.add_argument("--mode", choices=("dense", "dssa", "no_attention"), required=True)
    w.add_argument("--length", type=int, required=True)
    for p in (q, sp, w):
        p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    for p in (sp, w):
        p.add_argument("--new", type=int, default=8, help="tokens generated")
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--roles", type=pathlib.Path, default=ROLES)
    s = sub.add_parser("summary", help="table and plot from the records")
    for p in (q, s, sp):
        p.add_argument("--records", type=pathlib.Path, default=OUT / "sparse_qwen_records.jsonl")
    args = ap.parse_args()
    run = {"quality": quality, "speed": speed, "speed-worker": speed_worker,
           "summary": summary_cmd}  # fmt: skip
    run[args.cmd](args)


if __name__ == "__main__":
    main()

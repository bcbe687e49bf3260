"""SoLoPO vs DPO on short contexts vs DPO on long contexts (SmolLM2-135M-Instruct + LoRA).

1. Short-context QA items from lc-evals (default ``niah_multikey`` at ``--short-len``
   tokens); the policy is sampled on them and (correct, wrong) samples become
   preference pairs; each short context gets a long twin padded with irrelevant essay
   paragraphs to ``--train-len`` tokens.
2. Three LoRA runs from the same base, same pairs, same steps and batch size:
   ``solopo`` (short-context DPO + chosen-only SoLo-RA on the long twins),
   ``dpo_short`` (TRL DPO on the short prompts) and ``dpo_long`` (TRL DPO on the long
   prompts).
3. Greedy accuracy on held-out lc-evals items at ``--eval-lens`` (default 2x and 4x the
   training length), before training and after each run, with Wilson 95% intervals;
   wall time and peak memory per training step.

Writes docs/benchmarks/lc-train-solopo/solopo_vs_dpo.json and .png.

    nice -n 10 uv run python packages/lc-train/benchmarks/solopo_vs_dpo.py
    uv run python packages/lc-train/benchmarks/solopo_vs_dpo.py --device cuda \\
        --train-len 4096 --eval-lens 8192 --steps 200 --pairs 256 --eval-items 200
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import matplotlib
from _measure import PeakRSS  # first: re-executes with mmap'd large allocations

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from lc_evals.report import wilson_interval

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-solopo"
METHODS = ("dpo_short", "dpo_long", "solopo")


def distractor_paragraphs(seed: int, count: int = 400) -> list[str]:
    from lc_evals.haystack import essay_sentences

    rng = random.Random(seed)
    stream = essay_sentences(rng)
    return [" ".join(next(stream) for _ in range(3)) for _ in range(count)]


def make_step_meter(device: str) -> Any:
    from transformers import TrainerCallback

    class StepMeter(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.cuda_peaks: list[float] = []
            self._t = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            self._t = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if device == "cuda":
                torch.cuda.synchronize()
                self.cuda_peaks.append(torch.cuda.max_memory_allocated() / 2**20)
            self.times.append(time.perf_counter() - self._t)

    return StepMeter()


def evaluate(
    model: Any, tokenizer: Any, items: list[Any], scorer: Any, desc: str, args: argparse.Namespace
) -> dict:
    from tqdm import tqdm

    from lc_train.preference.sampling import chat_answer

    model.eval()
    correct = 0
    answers = []
    for item in tqdm(items, desc=desc, leave=False):
        reply = chat_answer(
            model,
            tokenizer,
            item.context,
            item.question,
            template=args.template,
            max_new_tokens=args.eval_max_new_tokens,
        )
        ok = scorer(reply, item.answers) >= 1.0
        correct += int(ok)
        answers.append({"id": item.id, "reply": reply, "correct": ok})
    lo, hi = wilson_interval(correct, len(items)) if items else (0.0, 1.0)
    return {
        "n": len(items),
        "correct": correct,
        "accuracy": correct / len(items),
        "ci95": [lo, hi],
        "replies": answers,
    }


def build_data(model: Any, tokenizer: Any, args: argparse.Namespace) -> tuple[list[Any], dict]:
    from tqdm import tqdm

    from lc_evals import generate, get_scorer, task_spec
    from lc_train.preference.data import build_pairs
    from lc_train.preference.sampling import chat_sampler

    scorer = get_scorer(task_spec(args.task).scorer)
    sample = chat_sampler(
        model,
        tokenizer,
        template=args.template,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
    )
    distractors = distractor_paragraphs(args.seed + 1)

    def n_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    pairs: list[Any] = []
    tried = 0
    bar = tqdm(total=args.pairs, desc="sampling pairs")
    batch = 8
    while len(pairs) < args.pairs and tried < args.max_items:
        items = generate(
            args.task, n=tried + batch, length=args.short_len, seed=args.seed, tokenizer=tokenizer
        )
        fresh = items[tried:]
        tried += batch
        triples = [(it.context, it.question, it.answers) for it in fresh]
        new = build_pairs(
            triples,
            sample=sample,
            is_correct=lambda r, a: scorer(r, a) >= 1.0,
            distractors=distractors,
            long_length=args.train_len,
            num_samples=args.samples,
            length_of=n_tokens,
            seed=args.seed + tried,
        )
        take = new[: args.pairs - len(pairs)]
        pairs.extend(take)
        bar.update(len(take))
    bar.close()
    stats = {
        "items_sampled": tried,
        "pairs": len(pairs),
        "short_tokens_mean": sum(n_tokens(p.short_context) for p in pairs) / max(1, len(pairs)),
        "long_tokens_mean": sum(n_tokens(p.long_context) for p in pairs) / max(1, len(pairs)),
    }
    return pairs, stats


def train(
    method: str, base: Any, tokenizer: Any, pairs: list[Any], args: argparse.Namespace
) -> tuple[Any, dict]:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import DPOConfig, DPOTrainer

    from lc_train.preference import SoLoPOConfig, SoLoPOTrainer, pair_records

    rows = pair_records(pairs, template=args.template, chat=True)
    if method == "dpo_long":
        rows = [{**r, "prompt": r["long_prompt"]} for r in rows]
    if method != "solopo":
        rows = [{k: v for k, v in r.items() if k != "long_prompt"} for r in rows]
    dataset = Dataset.from_list(rows)
    workdir = tempfile.mkdtemp(prefix=f"solopo-{method}-")
    config = DPOConfig(
        output_dir=workdir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=args.beta,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        max_length=None,
        gradient_checkpointing=args.gradient_checkpointing,
        use_cpu=args.device == "cpu",
        bf16=args.device == "cuda",
        disable_tqdm=False,
    )
    lora = LoraConfig(
        r=args.lora_r,
        lora_alpha=2 * args.lora_r,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )
    meter = make_step_meter(args.device)
    model = copy.deepcopy(base)
    common = {
        "args": config,
        "train_dataset": dataset,
        "processing_class": tokenizer,
        "peft_config": lora,
        "callbacks": [meter],
    }
    if method == "solopo":
        cfg = SoLoPOConfig(
            method="dpo", beta=args.beta, alignment_weight=args.alpha, chosen_only=True
        )
        trainer: Any = SoLoPOTrainer(model, solopo=cfg, **common)
    else:
        trainer = DPOTrainer(model, **common)
    with PeakRSS() as rss:
        trainer.train()
    times = meter.times[1:] or meter.times  # first step includes warm-up
    logs = [h for h in trainer.state.log_history if "loss" in h]
    stats = {
        "step_time_s_mean": sum(times) / len(times),
        "step_time_s_median": sorted(times)[len(times) // 2],
        "peak_mem_mib": (max(meter.cuda_peaks) if meter.cuda_peaks else rss.mib()),
        "peak_mem_kind": "cuda max_memory_allocated"
        if meter.cuda_peaks
        else "RSS above pre-training baseline",
        "train_seconds": sum(meter.times),
        "loss_first": logs[0]["loss"] if logs else None,
        "loss_last": logs[-1]["loss"] if logs else None,
        "log": logs,
    }
    return trainer.model, stats


def plot(result: dict, path: Path) -> None:
    lens = [str(n) for n in result["config"]["eval_lens"]]
    names = ["base", *METHODS]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        accs = [result["eval"][name][n]["accuracy"] for n in lens]
        los = [a - result["eval"][name][n]["ci95"][0] for a, n in zip(accs, lens)]
        his = [result["eval"][name][n]["ci95"][1] - a for a, n in zip(accs, lens)]
        xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(lens))]
        axes[0].bar(xs, accs, width, yerr=[los, his], capsize=3, label=name)
    axes[0].set_xticks(range(len(lens)), [f"{n} tok" for n in lens])
    axes[0].set_ylabel("held-out accuracy (Wilson 95% CI)")
    axes[0].set_title(f"{result['config']['task']}, trained at {result['config']['train_len']} tok")
    axes[0].legend(fontsize=8)
    train = result["train"]
    axes[1].bar(METHODS, [train[m]["step_time_s_mean"] for m in METHODS], color="tab:gray")
    axes[1].set_ylabel("seconds per step")
    axes[1].set_title("time per training step")
    axes[2].bar(METHODS, [train[m]["peak_mem_mib"] for m in METHODS], color="tab:blue")
    axes[2].set_ylabel("MiB")
    axes[2].set_title(f"peak memory ({train['solopo']['peak_mem_kind']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--task", default="niah_multikey")
    p.add_argument("--short-len", type=int, default=160, help="short-context tokens")
    p.add_argument("--train-len", type=int, default=512, help="long-twin tokens")
    p.add_argument("--eval-lens", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--eval-items", type=int, default=40)
    p.add_argument("--pairs", type=int, default=32)
    p.add_argument("--max-items", type=int, default=160, help="short items to sample at most")
    p.add_argument("--samples", type=int, default=4, help="samples per short item")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-new-tokens", type=int, default=16, help="sampled reply budget")
    p.add_argument(
        "--eval-max-new-tokens",
        type=int,
        default=32,
        help="greedy reply budget at evaluation; long enough for the untrained model's "
        "full-sentence answers, so that accuracy measures retrieval and not brevity",
    )
    p.add_argument(
        "--template",
        default="{context}\n\n{question} Answer with the number only.",
        help="user prompt for sampling, training and evaluation",
    )
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--batch", type=int, default=2, help="pairs per step")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--alpha", type=float, default=1.0, help="SoLo-RA weight")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from lc_agents.models import load_model
    from lc_evals import generate, get_scorer, task_spec

    start = time.time()
    base, tokenizer = load_model("smollm2-135m-instruct")
    base.to(args.device)
    scorer = get_scorer(task_spec(args.task).scorer)
    pairs, data_stats = build_data(base, tokenizer, args)
    if len(pairs) < args.batch:
        raise SystemExit(f"only {len(pairs)} pairs could be built; sample more items")
    eval_items = {
        str(n): generate(
            args.task, n=args.eval_items, length=n, seed=args.seed + 1000, tokenizer=tokenizer
        )
        for n in args.eval_lens
    }
    result: dict = {
        "config": {**{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}},
        "data": data_stats,
        "eval": {},
        "train": {},
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
        },
    }
    result["eval"]["base"] = {
        n: evaluate(base, tokenizer, items, scorer, f"base @ {n}", args)
        for n, items in eval_items.items()
    }
    print("base", {n: r["accuracy"] for n, r in result["eval"]["base"].items()}, flush=True)
    for method in METHODS:
        model, stats = train(method, base, tokenizer, pairs, args)
        result["train"][method] = stats
        result["eval"][method] = {
            n: evaluate(model, tokenizer, items, scorer, f"{method} @ {n}", args)
            for n, items in eval_items.items()
        }
        print(
            method,
            {n: r["accuracy"] for n, r in result["eval"][method].items()},
            f"{stats['step_time_s_mean']:.2f} s/step, {stats['peak_mem_mib']:.0f} MiB",
            flush=True,
        )
        del model
        gc.collect()
    result["wall_seconds"] = time.time() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "solopo_vs_dpo.json").write_text(json.dumps(result, indent=2))
    plot(result, args.out / "solopo_vs_dpo.png")
    print(f"wrote {args.out / 'solopo_vs_dpo.json'} in {result['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()

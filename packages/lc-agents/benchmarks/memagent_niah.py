"""MemAgent over the embedded SmolLM2-135M-Instruct on lc-evals NIAH (7-digit values).

Variants, side by side on the same items:

* ``plain``: MemAgent with free (prompted) memory updates and answers;
* ``copy``: the default configuration: sentence-bounded copy-constrained memory with a
  keep option, and an answer copied from the memory;
* ``one_pass``: the same model reading the whole document in one prompt (only up to
  ``--one-pass-max`` tokens; longer ones exceed its 8K window and are not run).

Tasks: ``niah_single`` (one needle in essay-like text) and ``niah_multikey`` (the needle
plus 3 distractor needles with other keys). A second mode (``--profile``) measures peak
resident memory and tokens/second of one MemAgent run per length, each in a fresh process.

Writes ``docs/benchmarks/lc-agents/memagent_niah.json`` and ``.png`` (results are saved
after every item, so an interrupted run keeps what it measured).

    uv run python packages/lc-agents/benchmarks/memagent_niah.py --lengths 4096 --items 5
    uv run python packages/lc-agents/benchmarks/memagent_niah.py --profile --lengths 16384 131072
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents"
TASKS = {"niah_single": {}, "niah_multikey": {"num_distractors": 3}}


def load_json(path: pathlib.Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


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
    prompt = f"{item.context}\n\n{item.question} Answer with the number only."
    return backend.chat([{"role": "user", "content": prompt}], max_tokens=16)


def accuracy(args) -> None:
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.memagent import MemAgent, MemAgentConfig
    from lc_agents.memagent.checkpoint import atomic_write_json

    torch.set_num_threads(args.threads)
    backend = LocalBackend()
    agents = {
        "plain": MemAgent(backend, MemAgentConfig.plain()),
        "copy": MemAgent(backend, MemAgentConfig()),
    }
    path = OUT / "memagent_niah.json"
    data = load_json(path)
    data["machine"] = args.machine
    data["model"] = "SmolLM2-135M-Instruct (embedded, fp32, CPU)"
    data["config"] = {"chunk_tokens": 1024, "memory_tokens": 64, "seed": args.seed}
    rows = data.setdefault("accuracy", {})
    for length in args.lengths:
        for task in args.tasks:
            items = items_for(task, args.items, length, args.seed, backend.tokenizer)
            for variant in args.variants:
                if variant == "one_pass" and length > args.one_pass_max:
                    rows[f"{task}/{length}/{variant}"] = {
                        "n": 0,
                        "correct": 0,
                        "note": "not run: document exceeds the model's 8K window",
                    }
                    continue
                key = f"{task}/{length}/{variant}"
                correct, seconds, answers = 0, 0.0, []
                for item in items:
                    t0 = time.perf_counter()
                    if variant == "one_pass":
                        answer = one_pass(backend, item)
                    else:
                        answer = agents[variant].run(item.context, item.question).answer
                    seconds += time.perf_counter() - t0
                    ok = item.answers[0] in answer
                    correct += ok
                    answers.append({"expected": item.answers[0], "answer": answer[:80], "ok": ok})
                    rows[key] = {
                        "n": len(answers),
                        "correct": correct,
                        "seconds_per_item": seconds / len(answers),
                        "answers": answers,
                    }
                    atomic_write_json(path, data)
                    print(f"{key}: {correct}/{len(answers)}", flush=True)
    plot(data)


def profile_one(length: int, seed: int, threads: int) -> dict:
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.memagent import MemAgent, MemAgentConfig

    torch.set_num_threads(threads)
    backend = LocalBackend()
    item = items_for("niah_single", 1, length, seed, backend.tokenizer)[0]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = MemAgent(backend, MemAgentConfig()).run(item.context, item.question)
    seconds = time.perf_counter() - t0
    return {
        "length": length,
        "document_tokens": result.document_tokens,
        "peak_rss_mib_after_load": rss_before / 1024,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
        "tokens_per_second": result.document_tokens / seconds,
        "correct": item.answers[0] in result.answer,
    }


def profile(args) -> None:
    from lc_agents.memagent.checkpoint import atomic_write_json

    path = OUT / "memagent_niah.json"
    for length in args.lengths:
        out = (
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--_profile-one",
                    str(length),
                    "--seed",
                    str(args.seed),
                    "--threads",
                    str(args.threads),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        data = load_json(path)
        data.setdefault("profile", {})[str(length)] = json.loads(out)
        data["machine"] = args.machine
        atomic_write_json(path, data)
        print(out, flush=True)
    plot(load_json(path))


def plot(data: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acc = data.get("accuracy", {})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, task in zip(axes, TASKS, strict=True):
        for variant, marker in (("plain", "o"), ("copy", "s"), ("one_pass", "^")):
            pts = sorted(
                (int(k.split("/")[1]), v["correct"] / v["n"])
                for k, v in acc.items()
                if k.startswith(task + "/") and k.endswith("/" + variant) and v["n"]
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=variant)
        ax.set_xscale("log", base=2)
        ax.set_title(task)
        ax.set_xlabel("document tokens")
        ax.set_ylim(-0.05, 1.05)
        ax.legend()
    axes[0].set_ylabel("accuracy")
    fig.suptitle("MemAgent on SmolLM2-135M-Instruct, lc-evals NIAH (7-digit values)")
    fig.tight_layout()
    fig.savefig(OUT / "memagent_niah.png", dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 65536, 131072])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument(
        "--variants",
        nargs="+",
        default=["plain", "copy", "one_pass"],
        choices=["plain", "copy", "one_pass"],
    )
    p.add_argument("--items", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--one-pass-max", type=int, default=16384)
    p.add_argument("--machine", default=f"{platform.machine()} CPU, 2 cores")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--_profile-one", type=int, dest="profile_one", default=None)
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.profile_one is not None:
        print(json.dumps(profile_one(args.profile_one, args.seed, args.threads)))
    elif args.profile:
        profile(args)
    else:
        accuracy(args)


if __name__ == "__main__":
    main()

"""Train the embedded SmolLM2-135M-Instruct into a memory agent: SFT warm start, then DAPO.

Stages (each resumable; results and checkpoints are written as they are produced):

* ``eval``  held-out accuracy of MemAgent (free-text memory updates, ``--chunk`` tokens per
  chunk) with the weights of a stage (``--weights base|sft|dapo``), plus the lc-agents
  default (copy-constrained, base weights) with ``--weights copy``; same items and seed
  for every stage; greedy decoding;
* ``sft``   LoRA on oracle memory-update and answer turns (lc_train.rl.traces) from
  training items (seeds disjoint from the evaluation seed);
* ``dapo``  multi-conversation DAPO from the SFT adapter (lc_train.rl.memagent/trainer):
  groups of sampled MemAgent episodes, reward on the final answer only, advantage
  broadcast to all turns, dynamic sampling, clip-higher, token-level loss;
* ``export`` write the adapter of a stage to lc_agents/adapters/memagent-smollm2/;
* ``plot``  the JSON results to PNG.

Writes ``docs/benchmarks/lc-train-rl/memagent_train.json`` and ``.png``; checkpoints
under ``--workdir`` (default ``~/.cache/lc-train/memagent``).

    nice -n 10 uv run python packages/lc-train/benchmarks/memagent_train.py eval --weights base
    nice -n 10 uv run python packages/lc-train/benchmarks/memagent_train.py sft --steps 40
    nice -n 10 uv run python packages/lc-train/benchmarks/memagent_train.py eval --weights sft
    nice -n 10 uv run python packages/lc-train/benchmarks/memagent_train.py dapo --steps 6
    nice -n 10 uv run python packages/lc-train/benchmarks/memagent_train.py eval --weights dapo
    uv run python packages/lc-train/benchmarks/memagent_train.py plot

On a GPU, add ``--device cuda`` and scale up, e.g. ``sft --steps 2000 --train-items 400``,
``dapo --steps 200 --group 8 --groups 4 --train-length 4096``, ``eval --items 50``.
``--model qwen2.5-coder-0.5b-instruct`` runs the recipe on the embedded Qwen-0.5B
(checkpoints under ``WORKDIR/MODEL``, results in ``memagent_train-MODEL.json``).

``sft`` and ``dapo`` also run under ``torchrun --nproc_per_node N`` (DDP, gloo on CPU,
NCCL on CUDA): each rank takes its share of the SFT batch (global batch ``batch x N``)
or rolls out its own groups, the steps average over every rank's tokens, and rank 0
writes the checkpoints and results; a stage resumes on the same number of ranks.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import time

from lc_evals.report import wilson_interval

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-train-rl"
RESULTS = OUT / "memagent_train.json"
ADAPTER_DIR = (
    ROOT / "packages" / "lc-agents" / "src" / "lc_agents" / "adapters" / "memagent-smollm2"
)
TASKS = {
    "niah_single": {"haystack": "essay", "value_kind": "number"},
    "niah_multikey": {"haystack": "essay", "value_kind": "number", "num_distractors": 3},
    "variable_tracking": {},
}
EVAL_SEED = 1000
DEFAULT_MODEL = "smollm2-135m-instruct"
MODELS = (DEFAULT_MODEL, "qwen2.5-coder-0.5b-instruct")
LORA = {
    "r": 8,
    "lora_alpha": 16,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
# LoRA on the top 8 layers (SmolLM2: 22-29 of 30; Qwen-0.5B: 16-23 of 24): the backward
# pass stops there (about half the cost of adapting every layer on a CPU)
LORA_TOP_LAYERS = 8


def load_json(path: pathlib.Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_json(path: pathlib.Path, data: dict, section: str, key: str | None = None) -> None:
    """Merge ``data[section]`` (or only ``data[section][key]``) into the file, atomically.

    Stages run as separate processes at the same time; each re-reads the file and writes
    back only its own part, so none overwrites another's results.
    """
    import fcntl
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = load_json(path)
        current["machine"] = data.get("machine", current.get("machine"))
        if key is None:
            current[section] = data[section]
        else:
            current.setdefault(section, {})[key] = data[section][key]
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(current, indent=1))
        tmp.replace(path)


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def agent_config(args, copy: bool = False):
    from lc_agents.memagent import MemAgentConfig

    if copy:
        return MemAgentConfig()
    return MemAgentConfig.plain(chunk_tokens=args.chunk, memory_tokens=args.memory)


def items(task: str, n: int, length: int, seed: int, tokenizer) -> list:
    import lc_evals

    return lc_evals.generate(
        task, n=n, length=length, seed=seed, tokenizer=tokenizer, **TASKS[task]
    )


def base_model(args):
    from lc_agents.models import load_model

    return load_model(args.model)


def lora_layers(model) -> list[int]:
    n = model.config.num_hidden_layers
    return list(range(max(0, n - LORA_TOP_LAYERS), n))


def lora_model(model, seed: int = 0):
    from lc_train import apply_lora

    return apply_lora(
        model,
        rank=LORA["r"],
        alpha=LORA["lora_alpha"],
        seed=seed,
        target_modules=LORA["target_modules"],
        layers=lora_layers(model),
    )


def distributed(args) -> tuple[int, int]:
    """``(rank, world size)``: under ``torchrun`` join the process group (gloo on CPU,
    NCCL on CUDA, one GPU per local rank); ``(0, 1)`` in one process."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if str(args.device).startswith("cuda"):
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            args.device = f"cuda:{local}"
        dist.init_process_group("nccl" if str(args.device).startswith("cuda") else "gloo")
    return dist.get_rank(), dist.get_world_size()


def data_parallel(model, world: int):
    """The policy as the steps see it: wrapped in DDP on two or more ranks."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model)


def end_distributed(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def check_world(log: dict, world: int, start: int) -> None:
    """A resumed stage keeps its world size (the global batch is per rank x world)."""
    if start and log.get("world_size", 1) != world:
        sys.exit(f"this stage ran on {log.get('world_size', 1)} rank(s); resume it on as many")


def label(args, stage: str) -> str:
    """Name of a trained stage in checkpoints and results: ``sft``, or ``sft+<variant>``."""
    return f"{stage}+{args.variant}" if args.variant and stage in ("sft", "dapo") else stage


def ckpt_path(args, stage: str) -> pathlib.Path:
    """``WORKDIR/STAGE.pt`` for SmolLM2, ``WORKDIR/MODEL/STAGE.pt`` for another model."""
    root = pathlib.Path(args.workdir).expanduser()
    return (root if args.model == DEFAULT_MODEL else root / args.model) / f"{stage}.pt"


def load_stage(args, stage: str):
    """(peft model, tokenizer) with the LoRA weights of ``stage`` (base: fresh LoRA = base)."""
    from lc_train.rl.trainer import load_checkpoint

    model, tok = base_model(args)
    model = lora_model(model.to(args.device), seed=args.seed)
    if stage != "base":
        path = ckpt_path(args, stage)
        if not path.exists():
            sys.exit(f"no checkpoint for stage {stage!r} at {path}; run that stage first")
        load_checkpoint(path, model)
    return model, tok


# ----------------------------------------------------------------------------- eval
def cmd_eval(args) -> None:
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.memagent import MemAgent

    torch.set_num_threads(args.threads)
    copy = args.weights == "copy"
    weights = label(args, args.weights)
    model, tok = load_stage(args, "base" if copy else weights)
    merged = model.merge_and_unload()
    backend = LocalBackend(merged, tok)
    agent = MemAgent(backend, agent_config(args, copy=copy))
    data = load_json(args.results)
    data["machine"] = args.machine
    data.setdefault("eval", {})
    from tqdm import tqdm

    import lc_evals

    for length in args.lengths:
        for task in args.tasks:
            key = f"{task}/{length}/{weights}"
            row = data["eval"].setdefault(key, {"answers": []})
            todo = items(task, args.items, length, EVAL_SEED, tok)
            done = {a["id"] for a in row["answers"]}
            if done:  # a rerun refreshes the summary of what is recorded
                summarize(row)
                save_json(args.results, data, "eval", key)
            for item in tqdm(todo, desc=key, file=sys.stderr):
                if item.id in done:
                    continue
                t0 = time.perf_counter()
                memory = ""
                try:
                    result = agent.run(item.context, item.question)
                    answer = result.answer
                    memory = result.memory
                except Exception as exc:  # empty answer: counted wrong
                    answer = f"<error: {type(exc).__name__}>"
                ok = lc_evals.score(item, answer) == 1.0
                row["answers"].append(
                    {
                        "id": item.id,
                        "expected": list(item.answers),
                        "answer": answer,
                        "final_memory": memory,
                        "ok": ok,
                        "seconds": round(time.perf_counter() - t0, 2),
                    }
                )
                summarize(row)
                save_json(args.results, data, "eval", key)


def summarize(row: dict) -> None:
    """Accuracy (all answers found), its Wilson interval, and the mean partial score."""
    from lc_evals.scorers import contains_all

    k = sum(a["ok"] for a in row["answers"])
    n = len(row["answers"])
    row.update(
        n=n,
        correct=k,
        accuracy=k / n if n else 0.0,
        ci95=wilson_interval(k, n) if n else (0.0, 1.0),
    )
    # fraction of the expected answers found, averaged (variable tracking: chain names)
    partial = [contains_all(a["answer"], a["expected"]) for a in row["answers"]]
    row["mean_score"] = round(sum(partial) / n, 4) if n else 0.0
    row["seconds_per_item"] = sum(a["seconds"] for a in row["answers"]) / max(n, 1)


# ----------------------------------------------------------------------------- sft
def sft_pool(args, tok) -> list:
    """Oracle turns of the training items (seeds disjoint from EVAL_SEED)."""
    from lc_train.rl.traces import oracle_turns, relevant_facts

    cfg = agent_config(args)
    rng = random.Random(args.seed)
    pool = []
    per_task = args.train_items
    for t_index, task in enumerate(args.tasks):
        for it in items(task, per_task, args.train_length, args.seed + t_index, tok):
            turns = oracle_turns(it, tok, cfg)
            if turns is None:
                continue
            updates = [t for t in turns if t.kind == "update"]
            kept = [
                t
                for t in updates
                if t.completion_ids[:-1]
                != tuple(tok.encode(cfg.keep_word, add_special_tokens=False))
            ]
            keeps = [t for t in updates if t not in kept]
            # every fact-writing update, the answer, and one keep ("none") update per item
            pool.extend(kept)
            if args.hard_negatives:
                # and every keep update whose chunk shows a needle that does not answer
                # the question (a distractor key): "none" is the right reply there too
                facts = set(relevant_facts(it))
                others = [n for n in it.metadata.get("needles", []) if n not in facts]
                hard = [t for t in keeps if any(n in tok.decode(t.prompt_ids) for n in others)]
                pool.extend(hard)
                keeps = [t for t in keeps if t not in hard]
            if keeps:
                pool.append(rng.choice(keeps))
            pool.append(turns[-1])
    rng.shuffle(pool)
    return pool


def cmd_sft(args) -> None:
    import torch
    from tqdm import tqdm

    from lc_train.rl.trainer import load_checkpoint, save_checkpoint, sft_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rank, world = distributed(args)
    model, tok = load_stage(args, "base")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    name = label(args, "sft")
    path = ckpt_path(args, name)
    start = 0
    if path.exists():
        start = load_checkpoint(path, model, opt)["step"]
    elif args.from_stage:  # a variant continuing another run (weights, optimizer, step)
        start = load_checkpoint(ckpt_path(args, args.from_stage), model, opt)["step"]
    pool = sft_pool(args, tok)
    data = load_json(args.results)
    log = data.setdefault(name, {"loss": []})
    if args.from_stage and not path.exists():
        log["from_stage"] = args.from_stage
        log["loss"] = data.get(args.from_stage, {}).get("loss", [])[:start]
    log["loss"] = log["loss"][:start]
    check_world(log, world, start)
    trained = data_parallel(model, world)
    log.update(
        world_size=world,
        pool_turns=len(pool),
        lr=args.lr,
        batch=args.batch,
        model=args.model,
        lora=LORA | {"layers_to_transform": lora_layers(model)},
        train_items=args.train_items,
        train_length=args.train_length,
        hard_negatives=args.hard_negatives,
    )
    bar = tqdm(
        range(start, args.steps),
        desc=name,
        file=sys.stderr,
        initial=start,
        total=args.steps,
        disable=rank != 0,
    )
    for step in bar:
        # the global batch is batch x world turns; rank r takes the r-th share
        first = step * args.batch * world + rank * args.batch
        idx = [(first + i) % len(pool) for i in range(args.batch)]
        stats = sft_step(
            trained, opt, [pool[i] for i in idx], micro_batch=args.micro, pad_id=tok.eos_token_id
        )
        log["loss"].append(round(stats["loss"], 4))  # the mean over all ranks' tokens
        bar.set_postfix(loss=f"{stats['loss']:.3f}")
        if (step + 1) % args.save_every == 0 or step + 1 == args.steps:
            log["peak_rss_mib"] = peak_rss_mib()
            save_checkpoint(path, trained, opt, step=step + 1)  # rank 0 writes
            if rank == 0:
                save_json(args.results, data, name)
    end_distributed(world)


def out_of_time(args, started: float, step_seconds: list[float]) -> bool:
    """Whether ``--time-budget`` (seconds of this process) leaves no room for one more
    step as long as the longest recorded one; the stage resumes where it stopped."""
    if not args.time_budget:
        return False
    longest = max(step_seconds, default=0.0)
    return time.perf_counter() - started + longest > args.time_budget


# ----------------------------------------------------------------------------- dapo
def cmd_dapo(args) -> None:
    import torch
    from tqdm import tqdm

    from lc_train.rl import DAPOConfig
    from lc_train.rl.memagent import rollout_group
    from lc_train.rl.trainer import build_turn_batch, dapo_step, load_checkpoint, save_checkpoint

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rank, world = distributed(args)
    path = ckpt_path(args, "dapo")
    model, tok = load_stage(args, args.from_stage or "sft")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    start = 0
    if path.exists():
        start = load_checkpoint(path, model, opt)["step"]
    cfg = agent_config(args)
    dcfg = DAPOConfig(max_length=args.memory, overlong_cache=args.memory // 4)
    data = load_json(args.results)
    log = data.setdefault("dapo", {"steps": []})
    log["steps"] = log["steps"][:start]
    check_world(log, world, start)
    trained = data_parallel(model, world)
    log.update(
        world_size=world,
        model=args.model,
        init=args.from_stage or "sft",
        group_size=args.group,
        groups=args.groups,
        max_draw=args.max_draw,
        lr=args.lr,
        train_length=args.train_length,
        chunk=args.chunk,
        memory=args.memory,
        temperature=args.temperature,
        tasks=list(args.tasks),
        lora=LORA | {"layers_to_transform": lora_layers(model)},
    )
    bar = tqdm(
        range(start, args.steps),
        desc="dapo",
        file=sys.stderr,
        initial=start,
        total=args.steps,
        disable=rank != 0,
    )
    started = time.perf_counter()
    for step in bar:
        if out_of_time(args, started, [s.get("seconds", 0.0) for s in log["steps"]]):
            if rank == 0:
                print(f"dapo: time budget spent, stopping after step {step}", file=sys.stderr)
            break
        # dynamic sampling: draw groups until `groups` informative ones (or a cap) are
        # found; each rank draws its own items (`key`: the same as `step` on one rank)
        t0 = time.perf_counter()
        key = step * world + rank
        groups, drawn, all_rewards = [], 0, []
        draw = 0
        while len(groups) < args.groups and drawn < args.groups * args.max_draw:
            task = args.tasks[(key * 7 + draw) % len(args.tasks)]
            item = items(task, 1, args.train_length, 10_000 + key * 100 + draw, tok)[0]
            draw += 1
            drawn += 1
            g = rollout_group(
                model,
                tok,
                item,
                cfg,
                group_size=args.group,
                seed=key * 1000 + draw,
                temperature=args.temperature,
            )
            all_rewards.append([e.reward for e in g])
            if len({e.reward for e in g}) > 1:
                groups.append(g)
        batch = build_turn_batch(groups, overlong=dcfg) if groups else None
        if world > 1:  # every rank's rewards; update only when every rank has turns
            import torch.distributed as dist

            gathered: list = [None] * world
            dist.all_gather_object(gathered, (drawn, all_rewards, batch is not None))
            drawn = sum(g[0] for g in gathered)
            all_rewards = [r for g in gathered for r in g[1]]
            if not all(g[2] for g in gathered):
                batch = None
        flat = [r for g in all_rewards for r in g]
        entry = {
            "step": step + 1,
            "drawn_groups": drawn,
            "rewards": all_rewards,
            # every sampled episode of the step: mean reward and share answered in full
            "reward_mean": round(sum(flat) / max(len(flat), 1), 4),
            "accuracy": round(sum(r == 1.0 for r in flat) / max(len(flat), 1), 4),
        }
        if batch is not None:
            stats = dapo_step(
                trained,
                opt,
                batch.turns,
                batch.advantages,
                dcfg,
                micro_batch=args.micro,
                temperature=args.temperature,
                pad_id=tok.eos_token_id,
            )
            entry.update({k: round(v, 4) for k, v in stats.items()}, turns=len(batch.turns))
        entry.update(seconds=round(time.perf_counter() - t0, 1), peak_rss_mib=peak_rss_mib())
        log["steps"].append(entry)
        bar.set_postfix(reward=f"{entry['reward_mean']:.2f}", kept=len(groups))
        save_checkpoint(path, trained, opt, step=step + 1)  # rank 0 writes
        if rank == 0:
            save_json(args.results, data, "dapo")
    end_distributed(world)


# ----------------------------------------------------------------------------- export
def cmd_export(args) -> None:
    """Write the adapter of a stage, with its training settings, for lc-agents to ship."""
    from lc_agents.adapters import save_adapter
    from lc_agents.models import EMBEDDED_MODEL

    if args.model != DEFAULT_MODEL:
        sys.exit(f"export writes the SmolLM2 adapter that lc-agents ships; not for {args.model}")
    stage = label(args, args.weights)
    model, _tok = load_stage(args, stage)
    data = load_json(args.results)
    training = {
        name: {k: v for k, v in data[name].items() if k not in ("loss", "steps")}
        | {"steps": len(data[name].get("loss", data[name].get("steps", [])))}
        for name in ("sft", "dapo")
        if name in data and (name == "sft" or stage.startswith("dapo"))
    }
    save_adapter(
        model,
        ADAPTER_DIR,
        description=(
            "MemAgent memory-update/answer LoRA for SmolLM2-135M-Instruct "
            f"(stage {stage}, chunk {args.chunk}, memory {args.memory} tokens)"
        ),
        base_model=EMBEDDED_MODEL,
        extra={
            "chunk_tokens": args.chunk,
            "memory_tokens": args.memory,
            "stage": stage,
            "training": training,
            "results": "docs/benchmarks/lc-train-rl/memagent_train.json",
        },
    )
    print("wrote", ADAPTER_DIR)


# ----------------------------------------------------------------------------- plot
def cmd_plot(args) -> None:
    """Accuracy against document length per task (a line per stage), SFT loss, DAPO reward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load_json(args.results)
    rows = data.get("eval", {})
    for row in rows.values():  # summaries derive from the recorded answers (not saved)
        summarize(row)
    tasks = [t for t in TASKS if any(k.startswith(t + "/") for k in rows)]
    fig, axes = plt.subplots(2, max(len(tasks), 2), figsize=(5 * max(len(tasks), 2), 8))
    for ax, task in zip(axes[0], tasks):
        found = sorted({k.split("/")[2] for k in rows} - {"copy", "base", "sft", "dapo"})
        markers = [("copy", "s"), ("base", "o"), ("sft", "^"), ("dapo", "v")]
        for stage, marker in markers + [(f, "D") for f in found]:
            pts = sorted(
                (int(k.split("/")[1]), r)
                for k, r in rows.items()
                if k.startswith(task + "/") and k.endswith("/" + stage) and r.get("n")
            )
            if not pts:
                continue
            xs = [x for x, _ in pts]
            ys = [r["accuracy"] for _, r in pts]
            err = [
                [r["accuracy"] - r["ci95"][0] for _, r in pts],
                [r["ci95"][1] - r["accuracy"] for _, r in pts],
            ]
            name = {"copy": "lc-agents default (score, base weights)"}.get(stage, stage)
            ax.errorbar(xs, ys, yerr=err, marker=marker, capsize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("document tokens")
        ax.set_ylabel("accuracy (95% Wilson CI)")
        ax.set_title(f"held-out {task}")
        ax.legend(fontsize=7)
    for ax in axes[0][len(tasks) :]:
        ax.axis("off")
    sft_runs = sorted(k for k in data if k == "sft" or k.startswith("sft+"))
    for name in sft_runs:
        loss = data[name].get("loss", [])
        first = (
            len(data.get(data[name].get("from_stage", ""), {}).get("loss", []))
            if name != "sft"
            else 0
        )
        first = min(first, len(loss))
        xs = range(first + 1, len(loss) + 1)
        axes[1][0].plot(xs, loss[first:], lw=0.8, alpha=0.4, label=f"{name} per step")
        if len(loss) >= 10:
            smooth = [sum(loss[i - 9 : i + 1]) / 10 for i in range(max(first, 9), len(loss))]
            axes[1][0].plot(
                range(max(first, 9) + 1, len(loss) + 1), smooth, label=f"{name} mean of 10"
            )
    axes[1][0].set_xlabel("SFT step")
    axes[1][0].set_ylabel("token NLL of the completions")
    axes[1][0].set_title("SFT on oracle turns" if sft_runs else "no SFT stage in these results")
    if sft_runs:
        axes[1][0].legend(fontsize=8)
    steps = data.get("dapo", {}).get("steps", [])
    if steps:
        mean_r = [
            sum(sum(g) for g in s["rewards"]) / max(1, sum(len(g) for g in s["rewards"]))
            for s in steps
        ]
        xs = [s["step"] for s in steps]
        axes[1][1].plot(xs, mean_r, marker="o", label="mean reward of the drawn groups")
        if any("accuracy" in s for s in steps):
            acc = [s.get("accuracy", float("nan")) for s in steps]
            axes[1][1].plot(xs, acc, marker="s", ls=":", label="share answered in full")
        axes[1][1].plot(
            xs, [s.get("clip_frac", 0.0) for s in steps], marker="x", label="clip fraction"
        )
        updated = [s for s in steps if "loss" in s]  # steps with an informative group
        if updated:
            axes[1][1].plot(
                [s["step"] for s in updated],
                [s["loss"] for s in updated],
                marker="D",
                ls="none",
                label="loss (steps that updated)",
            )
        axes[1][1].legend(fontsize=8)
    axes[1][1].set_xlabel("DAPO step")
    axes[1][1].set_title("multi-conversation DAPO")
    for ax in axes[1][2:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.results.with_suffix(".png"), dpi=110)
    print("wrote", args.results.with_suffix(".png"))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("stage", choices=["eval", "sft", "dapo", "export", "plot"])
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        choices=MODELS,
        help="embedded base model; another than SmolLM2 keeps its checkpoints under "
        "WORKDIR/MODEL and its results in memagent_train-MODEL.json",
    )
    p.add_argument("--weights", default="base", choices=["base", "sft", "dapo", "copy"])
    p.add_argument(
        "--variant",
        default="",
        help="name of a variant run: its sft/dapo checkpoints and results are 'sft+NAME'",
    )
    p.add_argument(
        "--from-stage",
        default="",
        help="sft with --variant: start from this stage's checkpoint (e.g. sft); dapo: the "
        "starting weights (default sft; base: RL without the SFT warm start)",
    )
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--lengths", nargs="+", type=int, default=[2048])
    p.add_argument("--items", type=int, default=6, help="evaluation items per task and length")
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--memory", type=int, default=96)
    p.add_argument("--train-length", type=int, default=1024)
    p.add_argument("--train-items", type=int, default=40, help="SFT items per task")
    p.add_argument(
        "--hard-negatives",
        action="store_true",
        help="SFT pool: add every 'none' update whose chunk shows a distractor needle",
    )
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--micro", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--save-every", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--max-draw", type=int, default=3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--time-budget",
        type=float,
        default=0.0,
        help="dapo: seconds this process may run; no step starts that would not end "
        "within it (judged by the longest step so far); rerun to continue",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="torch device of the model (cpu, cuda)")
    p.add_argument("--workdir", default="~/.cache/lc-train/memagent")
    p.add_argument("--machine", default="2-core x86_64 CPU (shared)")
    p.add_argument(
        "--results",
        type=pathlib.Path,
        default=None,
        help="results JSON (the plot goes beside it); default memagent_train.json "
        "(SmolLM2) or memagent_train-MODEL.json",
    )
    args = p.parse_args()
    if args.results is None:
        args.results = (
            RESULTS if args.model == DEFAULT_MODEL else OUT / f"memagent_train-{args.model}.json"
        )
    {"eval": cmd_eval, "sft": cmd_sft, "dapo": cmd_dapo, "export": cmd_export, "plot": cmd_plot}[
        args.stage
    ](args)


if __name__ == "__main__":
    main()

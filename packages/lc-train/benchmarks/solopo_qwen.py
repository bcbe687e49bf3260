"""SoLoPO on Qwen2.5-Coder-0.5B-Instruct: DPO, SimPO and ORPO, each with and without SoLo-RA.

The task is BABILong-style ``babilong_qa1`` from lc-evals ("Where is Mary?" over
facts scattered in essay text). The reply is scored as a choice: after the answer prefix
"Mary is in the", the place whose first token the model ranks highest among the six
places of the story world is its answer (chance 1/6).

1. Training pairs from short contexts (``--short-len`` tokens); chosen = the right place,
   rejected = the person's previous place (a near miss; another place if there is none);
   each short context has a long twin of ``--train-len`` tokens with the same story.
2. LoRA on the top ``--top-layers`` layers only. The hidden states entering those layers
   do not change while the adapters train, so they are computed once per sequence
   (:func:`lc_train.top_layers.split_top_layers`) and every run and evaluation afterwards
   pays for the top layers alone.
3. Six runs from the same base, pairs, order, steps and learning rate: ``dpo``,
   ``simpo``, ``orpo`` (the loss on short contexts) and ``*+solora`` (plus chosen-only
   SoLo-RA on the long twins, ``alpha = --alignment-weight``), all through
   :func:`lc_train.preference.solopo_loss`.
4. Accuracy on held-out items at ``--eval-lens`` (default 2x and 4x the training length),
   Wilson 95% intervals, McNemar's exact test of each method against the base model and of
   each ``+solora`` run against its base method; training seconds and peak memory.

Every stage keeps its results under ``--work`` and is skipped when found, so an interrupted
run resumes. Writes docs/benchmarks/lc-train-solopo/<tag>.json and .png.

    nice -n 5 uv run python packages/lc-train/benchmarks/solopo_qwen.py
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import time
from pathlib import Path
from typing import Any

import matplotlib
from _measure import PeakRSS  # first: re-executes with mmap'd large allocations

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from tqdm import tqdm

from lc_evals.report import compare, wilson_interval
from lc_evals.results import Result
from lc_evals.tasks import babilong
from lc_train.lora import apply_lora
from lc_train.preference import ResponseLogps, SoLoPOConfig, preference_loss, response_logps
from lc_train.preference import solopo_loss as solopo_objective
from lc_train.top_layers import split_top_layers

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-solopo"
BASE_METHODS = ("dpo", "simpo", "orpo")
METHODS = tuple(m + s for m in BASE_METHODS for s in ("", "+solora"))
TRAIN_SEED, EVAL_SEED = 1, 2


def answer_prefix(question: str) -> str:
    """The start of the reply that the next token completes with a place."""
    if m := re.fullmatch(r"Where is the (\w+)\?", question):
        return f"The {m[1]} is in the"
    if m := re.fullmatch(r"Where is (\w+)\?", question):
        return f"{m[1]} is in the"
    if m := re.fullmatch(r"Where was the (\w+) before the (\w+)\?", question):
        return f"Before the {m[2]}, the {m[1]} was in the"
    raise ValueError(f"no answer prefix for question {question!r}")


def prompt_ids(tok: Any, item: Any) -> list[int]:
    messages = [{"role": "user", "content": f"{item.context}\n\n{item.question}"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok(text + answer_prefix(item.question), add_special_tokens=False).input_ids


def near_miss(item: Any, rng: random.Random) -> str:
    """The asked person's previous place, else another place of the world."""
    person = item.question.removeprefix("Where is ").rstrip("?")
    gold = item.answers[0]
    visited = [
        f.rstrip(".").split(" the ")[-1]
        for f in item.metadata["facts"]
        if f.startswith(person + " ")
    ]
    earlier = [p for p in visited if p != gold]
    return earlier[-1] if earlier else rng.choice([p for p in babilong.PLACES if p != gold])


class Work:
    """Files of one run under ``root``: cached states, records, adapters."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("states", "adapters", "eval"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def states(self, name: str, ids: list[int], lower: Any) -> torch.Tensor:
        path = self.root / "states" / f"{name}.pt"
        if path.exists():
            saved = torch.load(path)
            if saved["ids"] == ids:
                return saved["h"]
        h = lower(torch.tensor([ids]))[0]
        torch.save({"ids": ids, "h": h}, path)
        return h

    def json(self, name: str) -> Any:
        path = self.root / name
        return json.loads(path.read_text()) if path.exists() else None

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.root / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.root / name)


def build(args: argparse.Namespace, tok: Any) -> tuple[list[dict], dict[int, list[Any]]]:
    gen = getattr(babilong, args.task)
    short = gen(args.pairs, args.short_len, TRAIN_SEED, tok, num_facts=args.num_facts)
    long = gen(args.pairs, args.train_len, TRAIN_SEED, tok, num_facts=args.num_facts)
    rng = random.Random(0)
    pairs = []
    for s, g in zip(short, long, strict=True):
        if (s.question, s.answers) != (g.question, g.answers):
            raise RuntimeError(f"long twin of {s.id} tells another story")
        pairs.append({"short": s, "long": g, "chosen": s.answers[0], "rejected": near_miss(s, rng)})
    evals = {
        n: gen(args.eval_items, n, EVAL_SEED, tok, num_facts=args.num_facts) for n in args.eval_lens
    }
    return pairs, evals


def response(tok: Any, place: str) -> list[int]:
    return tok(f" {place}.", add_special_tokens=False).input_ids


def sequences(tok: Any, pair: dict) -> dict[str, tuple[list[int], int]]:
    """``name -> (ids, prompt length)`` of the three sequences a pair is trained on."""
    out = {}
    for name, ctx, place in (
        ("short_chosen", "short", pair["chosen"]),
        ("short_rejected", "short", pair["rejected"]),
        ("long_chosen", "long", pair["chosen"]),
    ):
        p = prompt_ids(tok, pair[ctx])
        out[name] = (p + response(tok, place), len(p))
    return out


def logps(model: Any, ids: list[int], n_prompt: int, h: torch.Tensor) -> ResponseLogps:
    t = torch.tensor([ids])
    mask = torch.zeros_like(t)
    mask[0, n_prompt:] = 1
    return response_logps(model, t, mask, inputs_embeds=h[None])


def cat(parts: list[ResponseLogps], refs: list[float] | None) -> ResponseLogps:
    ref = torch.tensor(refs) if refs is not None else None
    return ResponseLogps(
        torch.cat([p.logps for p in parts]), torch.cat([p.lengths for p in parts]), ref
    )


def add_lora(upper: Any, args: argparse.Namespace) -> Any:
    """LoRA of rank ``--lora-rank`` (alpha twice the rank) on every projection, seeded
    with ``--seed``: every method starts from the same adapters."""
    return apply_lora(upper, rank=args.lora_rank, alpha=2 * args.lora_rank, seed=args.seed)


def train(
    method: str, args: argparse.Namespace, make_upper: Any, data: list[dict]
) -> tuple[Any, dict]:
    base, _, with_ra = method.partition("+")
    kwargs: dict[str, Any] = {
        "method": base,
        "alignment_weight": args.alignment_weight if with_ra else 0.0,
    }
    if base == "simpo":
        kwargs |= {"beta": args.simpo_beta, "simpo_gamma": args.simpo_gamma}
    config = SoLoPOConfig(**kwargs)
    model = add_lora(make_upper(), args)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    order = random.Random(args.seed)
    log = []
    t0 = time.perf_counter()
    steps = args.epochs * -(-len(data) // args.batch)
    bar = tqdm(total=steps, desc=f"training {method}", leave=False)
    with PeakRSS() as rss:
        for epoch in range(args.epochs):
            idx = list(range(len(data)))
            order.shuffle(idx)
            for start in range(0, len(idx), args.batch):
                batch = [data[i] for i in idx[start : start + args.batch]]
                parts = {
                    k: [logps(model, *d[k]) for d in batch]
                    for k in ("short_chosen", "short_rejected")
                }
                ref = base == "dpo"
                sc = cat(
                    parts["short_chosen"],
                    [d["ref"]["short_chosen"] for d in batch] if ref else None,
                )
                sr = cat(
                    parts["short_rejected"],
                    [d["ref"]["short_rejected"] for d in batch] if ref else None,
                )
                if with_ra:
                    lc_parts = [logps(model, *d["long_chosen"]) for d in batch]
                    lc = cat(lc_parts, [d["ref"]["long_chosen"] for d in batch] if ref else None)
                    loss, metrics = solopo_objective(config, sc, sr, lc)
                else:
                    loss = preference_loss(config, sc, sr).mean()
                    metrics = {"preference": float(loss.detach())}
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                log.append({"epoch": epoch, "loss": float(loss.detach()), **metrics})
                bar.update()
                bar.set_postfix(loss=f"{log[-1]['loss']:.3f}")
    bar.close()
    stats = {
        "train_seconds": round(time.perf_counter() - t0, 1),
        "steps": len(log),
        "peak_mib": round(rss.mib(), 1),
        "log": log,
    }
    model.eval()
    return model, stats


def choose(model: Any, h: torch.Tensor, firsts: list[int]) -> list[float]:
    with torch.no_grad():
        logits = model(inputs_embeds=h[None], logits_to_keep=1).logits[0, -1]
    return logits[firsts].float().tolist()


def evaluate(method: str, model: Any, work: Work, evals: dict, tok: Any, firsts: list[int]) -> None:
    for length, items in evals.items():
        path = work.root / "eval" / f"{method}-{length}.jsonl"
        done = (
            {json.loads(line)["id"] for line in path.read_text().splitlines()}
            if path.exists()
            else set()
        )
        with path.open("a") as f:
            for item in tqdm(items, desc=f"{method} @ {length}", leave=False):
                if item.id in done:
                    continue
                h = work.states(f"eval-{length}-{item.id}", prompt_ids(tok, item), None)
                scores = choose(model, h, firsts)
                pred = babilong.PLACES[max(range(len(scores)), key=scores.__getitem__)]
                r = Result(
                    item.id, item.task, pred, float(pred == item.answers[0]), "choice", item.answers
                )
                f.write(json.dumps(r.to_dict()) + "\n")
                f.flush()
        print(f"  {method} @ {length}: done", flush=True)


def load_results(work: Work, method: str, length: int) -> list[Result]:
    path = work.root / "eval" / f"{method}-{length}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [
        Result(r["id"], r["task"], r["prediction"], r["score"], r["scorer"], tuple(r["answers"]))
        for r in rows
    ]


def summary(args: argparse.Namespace, work: Work, trained: dict) -> dict:
    rows: dict[str, Any] = {}
    for method in ("base", *args.methods):
        row: dict[str, Any] = {
            "train": {k: v for k, v in trained.get(method, {}).items() if k != "log"}
        }
        for length in args.eval_lens:
            res = load_results(work, method, length)
            if not res:
                continue
            k = int(sum(r.score for r in res))
            lo, hi = wilson_interval(k, len(res))
            cell: dict[str, Any] = {
                "n": len(res),
                "correct": k,
                "accuracy": k / len(res),
                "ci95": [lo, hi],
            }
            others = {"vs_base": "base"} if method != "base" else {}
            if "+" in method:
                others["vs_without_solora"] = method.split("+")[0]
            for key, other in others.items():
                paired = load_results(work, other, length)
                if paired:
                    cell[key] = compare(res, paired)
            row[str(length)] = cell
        rows[method] = row
    return rows


def markdown_table(result: dict) -> str:
    """The results as the guide's table: accuracy [95% CI] per length, McNemar p-values
    against the base model and (for ``+solora``) against the method without it."""
    lens = result["eval_lens"]
    head = ["method"] + [f"acc @ {n:,} ({n / result['train_len']:.0f}x)" for n in lens]
    head += ["p vs base", "p vs no SoLo-RA", "train s", "peak MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, row in result["results"].items():
        cells = [row.get(str(n)) for n in lens]
        acc = [
            f"{c['accuracy']:.2f} [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] (n = {c['n']})"
            if c
            else "-"
            for c in cells
        ]

        def p(key: str, cells: list = cells) -> str:
            return " / ".join(f"{c[key]['p_value']:.2g}" if c and key in c else "-" for c in cells)

        train = row.get("train", {})
        cols = [name, *acc, p("vs_base"), p("vs_without_solora")]
        cols += [str(train.get("train_seconds", "-")), str(train.get("peak_mib", "-"))]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    lens = result["eval_lens"]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    names = list(result["results"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        cells = [result["results"][name].get(str(n)) for n in lens]
        xs = [j + (i - len(names) / 2 + 0.5) * width for j, c in enumerate(cells) if c]
        acc = [c["accuracy"] for c in cells if c]
        err = [
            [c["accuracy"] - c["ci95"][0] for c in cells if c],
            [c["ci95"][1] - c["accuracy"] for c in cells if c],
        ]
        hatch = "//" if "+solora" in name else None
        ax.bar(xs, acc, width, yerr=err, capsize=2, label=name, hatch=hatch, alpha=0.85)
    ax.axhline(1 / len(babilong.PLACES), color="grey", ls=":", lw=1, label="chance")
    ax.set_xticks(range(len(lens)), [f"{n} tokens ({n / result['train_len']:.0f}x)" for n in lens])
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_ylim(0, 1)
    ax.set_title(
        f"{result['model']}: {result['task']}, LoRA on the top {result['top_layers']} layers"
    )
    ax.legend(ncol=4, fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument(
        "--task", default="babilong_qa1", choices=["babilong_qa1", "babilong_qa2", "babilong_qa3"]
    )
    ap.add_argument("--num-facts", type=int, default=8)
    ap.add_argument("--short-len", type=int, default=192)
    ap.add_argument("--train-len", type=int, default=512)
    ap.add_argument("--eval-lens", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--eval-items", type=int, default=50)
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--top-layers", type=int, default=2)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--alignment-weight", type=float, default=1.0)
    ap.add_argument("--simpo-beta", type=float, default=2.0)
    ap.add_argument("--simpo-gamma", type=float, default=0.5)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tag", default="solopo_qwen")
    ap.add_argument(
        "--work", type=Path, default=Path.home() / ".cache" / "lc-train" / "solopo-qwen"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if min(args.eval_lens) <= args.train_len or args.short_len >= args.train_len:
        ap.error("need --short-len < --train-len < every --eval-lens")
    torch.set_num_threads(args.threads)

    from lc_agents.models import load_model

    t_start = time.perf_counter()
    model, tok = load_model(args.model)
    lower, make_upper = split_top_layers(model, args.top_layers)
    work = Work(args.work / args.tag)
    firsts = [response(tok, p)[0] for p in babilong.PLACES]
    if len(set(firsts)) != len(firsts):
        raise RuntimeError("the places' first tokens collide; the choice would be ambiguous")

    pairs, evals = build(args, tok)
    data = []
    for i, pair in enumerate(tqdm(pairs, desc="states of the training pairs")):
        seqs = sequences(tok, pair)
        data.append(
            {k: (ids, n, work.states(f"train-{i}-{k}", ids, lower)) for k, (ids, n) in seqs.items()}
        )
    for length, items in evals.items():
        for item in tqdm(items, desc=f"states of {len(items)} items at {length} tokens"):
            work.states(f"eval-{length}-{item.id}", prompt_ids(tok, item), lower)

    base = make_upper()
    refs = work.json("reference.json")
    if refs is None or len(refs) != len(data):
        with torch.no_grad():
            refs = [{k: float(logps(base, *d[k]).logps[0]) for k in d} for d in data]
        work.write_json("reference.json", refs)
    packed = [{**{k: d[k] for k in d}, "ref": r} for d, r in zip(data, refs, strict=True)]
    evaluate("base", base, work, evals, tok, firsts)

    trained = {}
    for method in args.methods:
        stats = work.json(f"adapters/{method}.json")
        if stats is None:
            print(f"training {method}", flush=True)
            model_m, stats = train(method, args, make_upper, packed)
            torch.save(
                {k: v for k, v in model_m.state_dict().items() if "lora_" in k},
                work.root / "adapters" / f"{method}.pt",
            )
            work.write_json(f"adapters/{method}.json", stats)
        else:
            model_m = add_lora(make_upper(), args)
            model_m.load_state_dict(
                torch.load(work.root / "adapters" / f"{method}.pt"), strict=False
            )
            model_m.eval()
        trained[method] = stats
        evaluate(method, model_m, work, evals, tok, firsts)

    result = {
        "model": args.model,
        "task": args.task,
        "num_facts": args.num_facts,
        "short_len": args.short_len,
        "train_len": args.train_len,
        "eval_lens": args.eval_lens,
        "pairs": len(pairs),
        "epochs": args.epochs,
        "batch": args.batch,
        "top_layers": args.top_layers,
        "lora_rank": args.lora_rank,
        "lr": args.lr,
        "alignment_weight": args.alignment_weight,
        "simpo": {"beta": args.simpo_beta, "gamma": args.simpo_gamma},
        "chance": 1 / len(babilong.PLACES),
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": args.threads},
        "wall_seconds_this_process": round(time.perf_counter() - t_start, 1),
        "results": summary(args, work, trained),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out / f"{args.tag}.png")
    print(markdown_table(result))
    print(
        json.dumps(
            {
                m: {k: v.get("accuracy") for k, v in r.items() if k != "train"}
                for m, r in result["results"].items()
            }
        )
    )
    return result


if __name__ == "__main__":
    main()

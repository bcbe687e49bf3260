"""ContextNav on label noise its filters were not written for, with a real model.

Task: five-way topic classification of real text: the first sentence of the docstrings
of Python's standard library (shipped with every Python), labelled by the module they
come from (``math``: math, cmath, statistics, fractions, random, Decimal; ``text``: str,
textwrap, re, string, difflib, unicodedata; ``files``: os.path, shutil, pathlib.Path,
glob, tempfile, filecmp, fnmatch; ``time``: time, calendar, datetime, ZoneInfo;
``network``: socket, urllib, http.client, ipaddress, ssl, email.utils, smtplib). The
label rule is checkable (``inspect`` says where a docstring lives); chance is 1/5.

Noise: for a share ``--flip`` of the pool's clean examples the pool also holds a
*paraphrase* (verb and noun substitutions that keep the sentence's form) carrying a
*wrong* label. Nothing about its form gives it away: it has the same mood and layout as
its twin and as the query, and its label is one of the task's labels. The label space is
not given to ContextNav (it infers it from the candidates).

Conditions, side by side on the same test items, each giving ``--shots`` examples to the
embedded Qwen2.5-Coder-0.5B-Instruct (offline), which is scored by the next-token
log-likelihood of each label after ``Topic:`` (one forward pass per prompt; the
prediction is the most likely label):

* ``oracle``: the ``--shots`` nearest *clean* examples (noise removed by hand): the ceiling;
* ``contextnav``: :class:`~lc_agents.contextnav.ContextNav`'s default plan
  (retrieve -> align_structure -> align_labels -> consistency -> dedup -> select_top),
  ``label_space=None``;
* ``similarity``: the ``--shots`` nearest examples of the noisy pool (MiniLM);
* ``random``: ``--shots`` examples drawn uniformly from the noisy pool;
* ``zero``: no examples (what the model knows without shots).

Seeds (``--seeds``) redraw the pool (which clean examples enter, which get a flipped
twin, which wrong label) and the random shots; the test items are the same for every
seed. Each answer is appended to ``contextnav_noise_records.jsonl`` keyed by
(condition, seed, item) and a rerun skips what is there, so an interrupted run resumes.
The summary ``contextnav_noise.json`` holds accuracy with 95% Wilson intervals per
condition (pooled over seeds, and per seed), the share of noisy shots each condition
chose, and paired ContextNav-vs-similarity counts; ``contextnav_noise.png`` plots it.

Other noise: ``--noise systematic`` (every topic's twins carry the same wrong label) or
``--noise replace`` (the paraphrase replaces its clean original), with ``--flip``; their
files get a suffix (``contextnav_noise_systematic0.4.json``). ``--audit N`` skips the
model and writes ``contextnav_noise_audit.json``: the share of flipped shots ContextNav
and similarity top-k choose for N items under each ``--audit-noise`` setting.

Run (shared 2-core CPU: about a minute per item for 5 conditions x 3 seeds; records
resume, ``--time-budget`` stops cleanly, ``--summarise`` rewrites JSON and PNG):
    nice -n 10 uv run python packages/lc-agents/benchmarks/contextnav_noise.py --threads 2
Pilot (10 items, one seed):
    nice -n 10 uv run python packages/lc-agents/benchmarks/contextnav_noise.py \\
        --test 10 --seeds 0 --out /tmp/cn-pilot
Model-free audits:
    nice -n 10 uv run python packages/lc-agents/benchmarks/contextnav_noise.py --audit 100
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import platform
import random
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-contextnav"
LABELS = ("math", "text", "files", "time", "network")
SOURCES: dict[str, tuple[str, ...]] = {
    "math": ("math", "cmath", "statistics", "fractions", "random", "decimal:Decimal"),
    "text": ("builtins:str", "textwrap", "re", "re:Pattern", "string", "difflib", "unicodedata"),
    "files": ("os.path", "shutil", "pathlib:Path", "glob", "tempfile", "filecmp", "fnmatch"),
    "time": (
        "time",
        "calendar",
        "datetime:datetime",
        "datetime:date",
        "datetime:timedelta",
        "zoneinfo:ZoneInfo",
    ),
    "network": (
        "socket",
        "socket:socket",
        "urllib.parse",
        "urllib.request",
        "http.client:HTTPConnection",
        "ipaddress",
        "ssl",
        "email.utils",
        "smtplib:SMTP",
    ),
}
INSTRUCTION = (
    "Classify each sentence from a Python library's documentation by the topic of the "
    "library it comes from."
)
CONDITIONS = ("oracle", "contextnav", "similarity", "random", "zero")

# Paraphrase: word substitutions that keep meaning and sentence form (mood, layout).
_SUBSTITUTIONS = (
    (r"\bReturn\b", "Give back"),
    (r"\breturn\b", "give back"),
    (r"\bReturns\b", "Gives back"),
    (r"\bCreate\b", "Make"),
    (r"\bcreate\b", "make"),
    (r"\bConvert\b", "Turn"),
    (r"\bconvert\b", "turn"),
    (r"\bSet\b", "Assign"),
    (r"\bGet\b", "Fetch"),
    (r"\bget\b", "fetch"),
    (r"\bCompute\b", "Calculate"),
    (r"\bcompute\b", "calculate"),
    (r"\bnumber of\b", "count of"),
    (r"\bspecified\b", "given"),
    (r"\bgiven\b", "supplied"),
    (r"\bobject\b", "instance"),
    (r"\bvalue\b", "quantity"),
    (r"\bvalues\b", "quantities"),
    (r"\bcopy\b", "duplicate"),
    (r"\bremove\b", "delete"),
    (r"\bRemove\b", "Delete"),
    (r"\bcontaining\b", "holding"),
    (r"\bcontains\b", "holds"),
    (r"\bspecific\b", "particular"),
    (r"\bbased on\b", "according to"),
    (r"\busing\b", "with"),
    (r"\bif\b", "when"),
    (r"\bthe\b", "that"),
)


def first_sentence(doc: str | None) -> str:
    """First sentence of a docstring's first prose paragraph ('' if none)."""
    text = inspect.cleandoc(doc or "")
    for para in (p for p in text.split("\n\n") if p.strip()):
        para = " ".join(para.split())
        if re.match(r"^[\w.]+\(.*\)( -> .*)?$", para) or "(" in para.split(" ")[0]:
            continue  # a signature line of a builtin
        return re.split(r"(?<=\.)\s", para)[0]
    return ""


def corpus() -> list[dict[str, str]]:
    """All usable (text, label, source) rows, in a fixed order, each text once."""
    seen: set[str] = set()
    rows: list[dict[str, str]] = []
    for label, specs in SOURCES.items():
        for spec in specs:
            mod, _, cls = spec.partition(":")
            obj: Any = importlib.import_module(mod)
            if cls:
                obj = getattr(obj, cls)
            for name in sorted(dir(obj)):
                if name.startswith("_"):
                    continue
                fn = getattr(obj, name, None)
                if not callable(fn) or inspect.isclass(fn):
                    continue
                s = first_sentence(getattr(fn, "__doc__", None))
                if len(s.split()) < 4 or len(s) > 160 or s in seen:
                    continue
                seen.add(s)
                rows.append({"text": s, "label": label, "source": f"{spec}.{name}"})
    return rows


def paraphrase(text: str) -> str:
    """``text`` with meaning-keeping substitutions (always differs from ``text``)."""
    out = text
    for pat, rep in _SUBSTITUTIONS:
        out = re.sub(pat, rep, out)
    if out == text:
        out = text.rstrip(".") + ", as documented."
    return out


def split(
    rows: list[dict[str, str]], n_test: int, n_pool: int, seed: int
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Balanced test items (the same for every seed) and a seeded clean pool from the rest."""
    fixed = random.Random("contextnav-noise-test")
    by_label: dict[str, list[dict[str, str]]] = {lab: [] for lab in LABELS}
    for r in rows:
        by_label[r["label"]].append(r)
    test: list[dict[str, str]] = []
    rest: list[dict[str, str]] = []
    per = n_test // len(LABELS)
    for lab in LABELS:
        group = list(by_label[lab])
        fixed.shuffle(group)
        test += group[:per]
        rest += group[per:]
    fixed.shuffle(test)  # labels interleaved, so a cut run stays balanced
    rng = random.Random(f"pool:{seed}")
    rng.shuffle(rest)
    return test, rest[:n_pool]


# the one wrong label of every topic under ``systematic`` noise
SYSTEMATIC = {
    "math": "time",
    "time": "math",
    "text": "files",
    "files": "network",
    "network": "text",
}
NOISE_KINDS = ("twins", "systematic", "replace")


def noisy_pool(
    clean: list[dict[str, str]], flip: float, seed: int, kind: str = "twins"
) -> list[dict[str, Any]]:
    """Clean rows plus, for a ``flip`` share of them, a paraphrase with a wrong label.

    ``kind``: ``twins`` (the wrong label drawn uniformly, the clean original kept),
    ``systematic`` (every topic's twins get the same wrong label, :data:`SYSTEMATIC`) or
    ``replace`` (as ``twins``, but the paraphrase replaces its clean original).
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {NOISE_KINDS}")
    rng = random.Random(f"flip:{seed}")
    out: list[dict[str, Any]] = [{**r, "id": f"c{i}", "noisy": False} for i, r in enumerate(clean)]
    chosen = rng.sample(range(len(clean)), round(flip * len(clean)))
    for i in sorted(chosen):
        wrong = rng.choice([lab for lab in LABELS if lab != clean[i]["label"]])
        if kind == "systematic":
            wrong = SYSTEMATIC[clean[i]["label"]]
        out.append(
            {
                "text": paraphrase(clean[i]["text"]),
                "label": wrong,
                "source": clean[i]["source"],
                "id": f"p{i}",
                "noisy": True,
            }
        )
    if kind == "replace":
        replaced = {f"c{i}" for i in chosen}
        out = [r for r in out if r["id"] not in replaced]
    return out


def audit(args: argparse.Namespace, rows: list[dict[str, str]]) -> None:
    """Model-free: the share of flipped shots ContextNav and similarity top-k choose under
    each noise kind and flip rate of ``--audit-noise`` (seed ``args.seeds[0]``)."""
    from lc_agents.contextnav import (
        ContextItem,
        ContextNav,
        ContextNavConfig,
        ExamplePool,
        similarity_shots,
    )
    from lc_agents.retrieval import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    seed = args.seeds[0]
    results = []
    for spec in args.audit_noise:
        kind, _, rate = spec.partition(":")
        test, clean = split(rows, args.test, args.pool, seed)
        pool_rows = noisy_pool(clean, float(rate), seed, kind)
        noisy_ids = {r["id"] for r in pool_rows if r["noisy"]}
        items = [ContextItem(r["id"], r["text"], r["label"]) for r in pool_rows]
        pool = ExamplePool.open(tempfile.mkdtemp(prefix="cn-audit-"), embedder)
        pool.add(items)
        nav = ContextNav(pool, ContextNavConfig(shots=args.shots))
        counts = {"contextnav": 0, "similarity": 0}
        for row in test[: args.audit]:
            q = ContextItem("q", row["text"])
            counts["contextnav"] += sum(s.id in noisy_ids for s in nav.build(q, None).examples)
            counts["similarity"] += sum(
                s.id in noisy_ids for s in similarity_shots(pool, q, args.shots)
            )
        n_shots = args.shots * min(args.audit, len(test))
        res = {
            "noise": kind,
            "flip": float(rate),
            "pool": len(items),
            "mislabelled": len(noisy_ids),
            "items": min(args.audit, len(test)),
            "flipped_shot_share": {m: c / n_shots for m, c in counts.items()},
        }
        print(json.dumps(res), flush=True)
        results.append(res)
    out = Path(args.out)
    (out / "contextnav_noise_audit.json").write_text(
        json.dumps({"seed": seed, "shots": args.shots, "audits": results}, indent=1)
    )


class Scorer:
    """Next-token label log-likelihood with the embedded model (memoised by prompt)."""

    def __init__(self, threads: int) -> None:
        import torch

        from lc_agents.models import load_model

        torch.set_num_threads(threads)
        self.torch = torch
        self.model, self.tok = load_model(None)
        self.label_ids = []
        for lab in LABELS:
            ids = self.tok.encode(" " + lab)
            if len(ids) != 1:
                raise ValueError(f"label {lab!r} is not one token: {ids}")
            self.label_ids.append(ids[0])
        self.memo: dict[str, list[float]] = {}
        self.forwards = 0

    @staticmethod
    def prompt(query: str, shots: list[tuple[str, str]]) -> str:
        parts = [INSTRUCTION, ""]
        for text, label in shots:
            parts += [f"Sentence: {text}", f"Topic: {label}", ""]
        parts += [f"Sentence: {query}", "Topic:"]
        return "\n".join(parts)

    def logprobs(self, prompts: list[str]) -> list[list[float]]:
        """Label log-probabilities after each prompt (one padded forward for the new ones)."""
        keys = [hashlib.sha256(p.encode()).hexdigest() for p in prompts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.memo))
        if todo:
            by_key = dict(zip(keys, prompts, strict=True))
            ids = [self.tok.encode(by_key[k]) for k in todo]
            width = max(len(x) for x in ids)
            pad = self.tok.pad_token_id or 0
            batch = self.torch.tensor([x + [pad] * (width - len(x)) for x in ids])
            mask = self.torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
            with self.torch.inference_mode():
                logits = self.model(input_ids=batch, attention_mask=mask).logits.float()
            last = self.torch.tensor([len(x) - 1 for x in ids])
            lp = self.torch.log_softmax(logits[self.torch.arange(len(ids)), last], -1)
            for k, row in zip(todo, lp[:, self.label_ids], strict=True):
                self.memo[k] = [round(float(x), 4) for x in row]
            self.forwards += len(todo)
        return [self.memo[k] for k in keys]


def suffix(args: argparse.Namespace) -> str:
    """File-name suffix of a noise setting other than the default (twins, 0.4)."""
    return "" if (args.noise, args.flip) == ("twins", 0.4) else f"_{args.noise}{args.flip:g}"


def load_records(path: Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[(r["condition"], r["seed"], r["item"])] = r
    return out


def summarise(
    records: list[dict[str, Any]], conditions: list[str], seeds: list[int]
) -> dict[str, Any]:
    from scipy.stats import binomtest

    from lc_evals.report import wilson_interval

    acc: dict[str, Any] = {}
    for c in conditions:
        rs = [r for r in records if r["condition"] == c]
        if c == "zero":  # no shots: the same prompt for every seed, count each item once
            rs = [r for r in rs if r["seed"] == seeds[0]]
        if not rs:
            continue
        k = sum(r["correct"] for r in rs)
        lo, hi = wilson_interval(k, len(rs))
        per_seed = {}
        for s in seeds:
            rss = [r for r in rs if r["seed"] == s]
            if rss:
                ks = sum(r["correct"] for r in rss)
                per_seed[str(s)] = {
                    "correct": ks,
                    "n": len(rss),
                    "accuracy": ks / len(rss),
                    "wilson95": list(wilson_interval(ks, len(rss))),
                }
        shots = sum(len(r["shots"]) for r in rs)
        margins = [r["margin"] for r in rs]
        m_mean = sum(margins) / len(margins)
        m_sd = (sum((x - m_mean) ** 2 for x in margins) / max(len(margins) - 1, 1)) ** 0.5
        m_half = 1.96 * m_sd / len(margins) ** 0.5
        acc[c] = {
            "correct": k,
            "n": len(rs),
            "accuracy": k / len(rs),
            "wilson95": [lo, hi],
            "noisy_shot_share": (sum(r["noisy_shots"] for r in rs) / shots) if shots else 0.0,
            "mean_shots": shots / len(rs),
            "gold_margin": {"mean": m_mean, "ci95": [m_mean - m_half, m_mean + m_half]},
            "per_seed": per_seed,
        }
    paired: dict[str, Any] = {}
    by_key = {(r["condition"], r["seed"], r["item"]): r for r in records}
    for a, b in (("contextnav", "similarity"), ("contextnav", "random"), ("oracle", "similarity")):
        keys = [(s, i) for (c, s, i) in by_key if c == a and (b, s, i) in by_key]
        wins = sum(
            by_key[(a, s, i)]["correct"] and not by_key[(b, s, i)]["correct"] for s, i in keys
        )
        losses = sum(
            by_key[(b, s, i)]["correct"] and not by_key[(a, s, i)]["correct"] for s, i in keys
        )
        p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
        paired[f"{a}_vs_{b}"] = {
            "pairs": len(keys),
            f"{a}_only_right": wins,
            f"{b}_only_right": losses,
            "exact_sign_test_p": p,
        }
    return {"accuracy": acc, "paired": paired}


def plot(summary: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acc = summary["accuracy"]
    conds = list(acc)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ys = [acc[c]["accuracy"] for c in conds]
    err = [
        [y - acc[c]["wilson95"][0] for c, y in zip(conds, ys, strict=True)],
        [acc[c]["wilson95"][1] - y for c, y in zip(conds, ys, strict=True)],
    ]
    colours = {
        "oracle": "tab:green",
        "contextnav": "tab:blue",
        "similarity": "tab:orange",
        "random": "tab:gray",
        "zero": "tab:brown",
    }
    axes[0].bar(conds, ys, yerr=err, capsize=4, color=[colours.get(c, "k") for c in conds])
    axes[0].axhline(1 / len(LABELS), color="k", ls="--", lw=1, label="chance")
    axes[0].set_ylim(0, 1)
    axes[0].set_ylabel("accuracy (95% Wilson)")
    axes[0].set_title(title, fontsize=9)
    axes[0].legend(fontsize=8, loc="lower right")
    shot_conds = [c for c in conds if acc[c]["mean_shots"] > 0]
    axes[1].bar(
        shot_conds,
        [acc[c]["noisy_shot_share"] for c in shot_conds],
        color=[colours.get(c, "k") for c in shot_conds],
    )
    axes[1].set_ylabel("share of chosen shots that are flipped")
    axes[1].set_title("noise in the chosen shots", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--test", type=int, default=100, help="test items (balanced over labels)")
    ap.add_argument("--pool", type=int, default=300, help="clean examples in the pool")
    ap.add_argument(
        "--flip", type=float, default=0.4, help="share of pool rows given a flipped twin"
    )
    ap.add_argument("--shots", type=int, default=4)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument(
        "--time-budget", type=float, default=0.0, help="seconds; start no item after (0: none)"
    )
    ap.add_argument("--noise", choices=NOISE_KINDS, default="twins")
    ap.add_argument(
        "--audit", type=int, default=0, help="model-free shot audit over this many items, then stop"
    )
    ap.add_argument(
        "--audit-noise",
        nargs="+",
        default=["twins:0.4", "systematic:0.4", "replace:0.4", "systematic:1.0"],
        help="KIND:FLIP pairs audited by --audit",
    )
    ap.add_argument(
        "--summarise", action="store_true", help="only rewrite the JSON and PNG from the records"
    )
    args = ap.parse_args()
    t0 = time.time()

    from lc_agents.contextnav import (
        ContextItem,
        ContextNav,
        ContextNavConfig,
        ExamplePool,
        random_shots,
        similarity_shots,
    )
    from lc_agents.retrieval import MiniLMEmbedder

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rec_path = out / f"contextnav_noise{suffix(args)}_records.jsonl"
    done = load_records(rec_path)
    rows = corpus()
    counts = Counter(r["label"] for r in rows)
    print(f"corpus: {len(rows)} sentences {dict(counts)}", flush=True)
    if args.audit:
        audit(args, rows)
        return
    if args.summarise:
        write_summary(args, rows, done, {}, None, t0)
        return
    embedder = MiniLMEmbedder()
    scorer = Scorer(args.threads)
    config = ContextNavConfig(shots=args.shots)

    setups: dict[int, dict[str, Any]] = {}
    for seed in args.seeds:
        test, clean = split(rows, args.test, args.pool, seed)
        pool_rows = noisy_pool(clean, args.flip, seed, args.noise)
        noisy_ids = {r["id"] for r in pool_rows if r["noisy"]}
        items = [
            ContextItem(r["id"], r["text"], r["label"], metadata={"source": r["source"]})
            for r in pool_rows
        ]
        pool = ExamplePool.open(tempfile.mkdtemp(prefix="cn-noise-"), embedder)
        pool.add(items)
        clean_pool = ExamplePool.open(tempfile.mkdtemp(prefix="cn-clean-"), embedder)
        clean_pool.add([it for it in items if it.id not in noisy_ids])
        setups[seed] = {
            "items": items,
            "noisy_ids": noisy_ids,
            "pool": pool,
            "clean_pool": clean_pool,
            "nav": ContextNav(pool, config),
        }
        print(
            f"seed {seed}: pool {len(items)} ({len(noisy_ids)} flipped paraphrases), "
            f"test {len(test)}",
            flush=True,
        )
    t_eval = time.time()
    with rec_path.open("a") as fh:
        for n, row in enumerate(test):  # items outer, seeds inner: a cut run stays balanced
            if args.time_budget and time.time() - t0 > args.time_budget:
                print(f"time budget spent after {n} items", flush=True)
                break
            item_id = row["source"]
            q = ContextItem(f"q:{item_id}", row["text"])
            todo: list[tuple[str, int, list[Any], list[str]]] = []
            for seed in args.seeds:
                st = setups[seed]
                for cond in args.conditions:
                    if (cond, seed, item_id) in done:
                        continue
                    trace: list[str] = []
                    if cond == "oracle":
                        shots = similarity_shots(st["clean_pool"], q, args.shots)
                    elif cond == "contextnav":
                        res = st["nav"].build(q, label_space=None)
                        shots, trace = res.examples, res.trace
                    elif cond == "similarity":
                        shots = similarity_shots(st["pool"], q, args.shots)
                    elif cond == "random":
                        shots = random_shots(st["items"], args.shots, seed=seed, query_id=q.id)
                    else:
                        shots = []
                    todo.append((cond, seed, shots, trace))
            scores = scorer.logprobs(
                [
                    scorer.prompt(row["text"], [(s.text, str(s.label)) for s in shots])
                    for _, _, shots, _ in todo
                ]
            )
            for (cond, seed, shots, trace), lp in zip(todo, scores, strict=True):
                pred = LABELS[max(range(len(LABELS)), key=lambda j: lp[j])]
                gold = LABELS.index(row["label"])
                rec = {
                    "condition": cond,
                    "seed": seed,
                    "item": item_id,
                    "gold": row["label"],
                    "pred": pred,
                    "correct": pred == row["label"],
                    "margin": lp[gold] - max(x for j, x in enumerate(lp) if j != gold),
                    "logprobs": dict(zip(LABELS, lp, strict=True)),
                    "shots": [s.id for s in shots],
                    "shot_labels": [s.label for s in shots],
                    "noisy_shots": sum(s.id in setups[seed]["noisy_ids"] for s in shots),
                    "trace": trace,
                }
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                done[(cond, seed, item_id)] = rec
            if (n + 1) % 5 == 0 or n + 1 == len(test):
                line = " ".join(
                    f"{c}={sum(r['correct'] for r in done.values() if r['condition'] == c)}"
                    f"/{sum(r['condition'] == c for r in done.values())}"
                    for c in args.conditions
                )
                print(
                    f"[{n + 1}/{len(test)}] {line} "
                    f"({time.time() - t_eval:.0f} s, {scorer.forwards} forwards)",
                    flush=True,
                )
    seconds = {"eval": time.time() - t_eval}
    write_summary(args, rows, done, seconds, scorer.forwards, t0)


def write_summary(
    args: argparse.Namespace,
    rows: list[dict[str, str]],
    done: dict[tuple[str, int, str], dict[str, Any]],
    seconds: dict[str, float],
    forwards: int | None,
    t0: float,
) -> None:
    """Summarise the records of the test items into the JSON and the PNG."""
    from lc_agents.contextnav import default_grammar

    out = Path(args.out)
    test_ids = [r["source"] for r in split(rows, args.test, args.pool, 0)[0]]
    records = [
        r
        for (c, s, i), r in done.items()
        if c in args.conditions and s in args.seeds and i in set(test_ids)
    ]
    complete = [
        i for i in test_ids if all((c, s, i) in done for c in args.conditions for s in args.seeds)
    ]
    summary = summarise(records, list(args.conditions), list(args.seeds))
    counts = Counter(r["label"] for r in rows)
    report = {
        "benchmark": "contextnav_noise",
        "machine": f"2-core CPU ({platform.processor() or platform.machine()}), shared",
        "model": "Qwen2.5-Coder-0.5B-Instruct (embedded, fp32), next-token label log-likelihood",
        "embedder": "all-MiniLM-L6-v2",
        "labels": list(LABELS),
        "chance": 1 / len(LABELS),
        "corpus": {"sentences": len(rows), "per_label": dict(counts)},
        "args": vars(args),
        "items_planned": len(test_ids),
        "items_complete": len(complete),
        "contextnav_plan": list(default_grammar().plan()),
        "label_space_given": False,
        **summary,
        "forwards_this_run": forwards,
        "seconds": {**seconds, "total": time.time() - t0},
    }
    (out / f"contextnav_noise{suffix(args)}.json").write_text(json.dumps(report, indent=1))
    title = (
        f"Qwen2.5-Coder-0.5B, {args.shots}-shot, {len(complete)} items x {len(args.seeds)} "
        f"seeds, {args.flip:.0%} flipped ({args.noise})"
    )
    plot(summary, out / f"contextnav_noise{suffix(args)}.png", title)
    print(json.dumps({c: v["accuracy"] for c, v in summary["accuracy"].items()}, indent=1))
    print(json.dumps(summary["paired"], indent=1))


if __name__ == "__main__":
    main()

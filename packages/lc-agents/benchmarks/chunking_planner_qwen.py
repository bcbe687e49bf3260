"""The chunking planner on tasks with different optima, Qwen2.5-Coder-0.5B as every worker.

Question: fitted on a few pilot items only, does the planner of ``lc_agents.chunking``
pick the best (or a tied-best) chunk size on held-out items, per task, and does a
per-task plan beat one fixed policy ("always one pass", "always N tokens") over the tasks?

Tasks (generated and seeded here; nothing is downloaded). Documents are Python snippets
(``table``: CSV) with four-digit values; the answer is one value.

* ``lookup`` (default): ``--lines`` assignments such as ``canyon_velvet = 5170``
  (variable names share words, so near-miss names stand nearby; one line in five is an
  alias such as ``sail_velvet = sail_melody``); the asked variable is assigned a number
  on one line. A worker that holds that line can answer; reading gets worse with length,
  so smaller chunks should help until cuts and the other workers' noise win. A keyword
  search for ``name =`` solves it: it measures reading, not search.
* ``scoped`` (default): four classes with the same ``--lines // 4`` attribute names in
  different orders (``class Farmer:`` / ``    pocket = 2221``); ``Farmer.pocket`` is
  asked. The attribute line alone is ambiguous (every class has one): a worker needs the
  class header too, which is up to a class body away, so cutting breaks the dependence
  and one pass or large chunks should be best. One keyword search (``pocket =``) finds
  four candidates; it takes the class header as well to choose.
* ``update``, ``alias`` (optional; probed and left out of the default run): the asked
  variable is assigned twice and its final value is asked; or it is assigned another
  variable assigned a number elsewhere. In pilots the model answered either assignment
  in one pass (``update``) and was at the floor at every length tried (``alias``).
* ``table`` (optional; probed and left out of the default run): a CSV table, a header
  naming three value columns and ``--lines // 2`` rows (row names share words);
  ``canyon_velvet``'s ``marble`` is asked. The row line holds three numbers and only
  the header says which is asked, so a chunk without the header can only guess. In
  probes (items of another split) the 0.5B model read 0 of 16 tables right in one pass
  (6 of 16 with 6 rows): it cannot serve as the reader; the 1.5B model read 7 of 12 in
  one pass and, without the header, still picked the right column about a third of the
  time (4 of 8 at 128-token chunks).

Workers read token chunks (no overlap; a line cut at a boundary is task noise) with the
prompt ``WORKER_TEMPLATE``, greedily, at most ``--max-tokens`` new tokens, batched with
left padding (``BatchedReader``). The aggregator is a majority vote over the four-digit
numbers the workers wrote (other replies abstain; ties, the usual case since workers
without the answer still write some number, go to the number written with the highest
log-probability); one pass takes the reader's number. Correct = equal to the gold value.

Protocol. Pilot items (``--pilot-items`` per task) run only at ``--pilot-sizes`` and in
one pass; ``fit_noise_model`` (``fit_base_noise=False``: three worker counts) and
``recommend_chunking`` over the candidate sizes see only them. Held-out items (other
seeds: disjoint) run at every size of ``--sizes`` and in one pass. The analysis reports
per task the measured sweep (95% Wilson intervals) beside the planner's predicted
curve, the recommendation, the measured best and whether the recommendation ties it
(same accuracy, or exact McNemar p > 0.05 on the paired held-out items), and, over the
tasks, the planner against fixed policies (one pass; each fixed size; the fixed size
best over all tasks, chosen in hindsight; each task's best in hindsight, an upper bound).

Every (task, item, chunk size) result is appended to ``<name>_records.jsonl`` and
skipped on a rerun; ``--time-budget`` (seconds) stops cleanly between cells; the JSON
and PNG are rewritten from the records at the end (``--summarise``: only that).

Run (the defaults are the full run: 2 tasks x (24 pilot items at 3 sizes + 120 held-out
items at 5 sizes); about 70 CPU-minutes on one core in bfloat16):
    OMP_NUM_THREADS=1 nice -n 15 uv run python packages/lc-agents/benchmarks/chunking_planner_qwen.py

Writes docs/benchmarks/lc-agents-chunking/chunking_planner_qwen{_records.jsonl,.json,.png}.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _report import json_safe

from lc_agents.chunking import (
    ChunkAndAggregate,
    ChunkingConfig,
    NoiseModel,
    PilotResult,
    count_units,
    fit_noise_model,
    recommend_chunking,
)

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-chunking"
MODEL = "qwen2.5-coder-0.5b-instruct"
TASKS: dict[str, str] = {
    "lookup": "lookup: the asked variable is assigned a number on one line",
    "update": "update: the asked variable is assigned twice; its final value is asked",
    "alias": "alias: the asked variable is assigned a variable assigned a number elsewhere",
    "scoped": "scoped: classes share attribute names; one class's attribute is asked",
    "table": "table: a CSV table with one header line; one row's value in one column is asked",
}
SINGLE = "single"
WORKER_TEMPLATE = "```python\n{document}\n```\n\n{question}"
TEMPLATES: dict[str, str] = {task: WORKER_TEMPLATE for task in TASKS} | {
    "table": "```csv\n{document}\n```\n\n{question}"
}
_IF_NONE = (
    " If `{var}` is not assigned in this code, reply none. Otherwise reply with the number only."
)
QUESTIONS: dict[str, str] = {
    "lookup": "After this code runs, what is the value of `{var}`?" + _IF_NONE,
    "update": "After this code runs, what is the value of `{var}`?" + _IF_NONE,
    "alias": "After this code runs, what is the value of `{var}`?" + _IF_NONE,
    "scoped": "After this code runs, what is the value of `{var}`?" + _IF_NONE,
    "table": "In this table, what is the {column} of {row}? If {row} is not a row of this table,"
    " reply none. Otherwise reply with the number only.",
}
NUMBER = re.compile(r"\b\d{4}\b")  # values are four-digit: other numbers abstain
CONFIDENCE = re.compile(r" \(logprob (-?[\d.]+)\)$")


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    """What one run measures (validated; the CLI maps its flags onto these fields)."""

    tasks: tuple[str, ...] = ("lookup", "scoped")
    items: int = 120
    pilot_items: int = 24
    lines: int = 32
    sizes: tuple[int, ...] = (32, 64, 128, 256)
    pilot_sizes: tuple[int, ...] = (32, 128)
    batch: int = 16
    max_tokens: int = 6
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.tasks or any(t not in TASKS for t in self.tasks):
            raise ValueError(f"tasks={list(self.tasks)} is invalid: allowed {sorted(TASKS)}")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks={list(self.tasks)} is invalid: repeated task")
        for name in ("items", "pilot_items", "batch", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} is invalid: must be >= 1")
        if self.lines < 8:
            raise ValueError(f"lines={self.lines} is invalid: must be >= 8")
        if (
            not self.sizes
            or any(s < 8 for s in self.sizes)
            or len(set(self.sizes)) != len(self.sizes)
        ):
            raise ValueError(
                f"sizes={list(self.sizes)} is invalid: need distinct chunk sizes >= 8 tokens"
            )
        if not self.pilot_sizes or not set(self.pilot_sizes) <= set(self.sizes):
            raise ValueError(
                f"pilot_sizes={list(self.pilot_sizes)} is invalid: need a non-empty subset "
                f"of sizes={list(self.sizes)}"
            )


# ------------------------------------------------------------------------------ tasks
def make_item(task: str, split: str, index: int, seed: int, lines: int) -> dict[str, Any]:
    """One document and question. ``split`` ("pilot"/"heldout") seeds it, so splits are disjoint."""
    from lc_evals.words import NOUNS

    if task not in TASKS:
        raise ValueError(f"task={task!r} is invalid: allowed {sorted(TASKS)}")
    rng = random.Random(f"chunking-qwen-{task}-{seed}-{split}-{index}")
    pool = sorted(set(NOUNS))
    if task == "scoped":
        return _scoped_item(rng, pool, split, index, seed, lines)
    if task == "table":
        return _table_item(rng, pool, split, index, seed, lines)
    nouns = rng.sample(pool, max(3, lines // 3))
    names = _shared_word_names(rng, nouns, rng.sample(pool, 12), lines)
    values = rng.sample(range(1000, 10000), lines)
    # The asked variable's lines are placed first; other lines are aliases of an earlier
    # number-valued variable with probability 0.2 (never of the asked lines).
    if task == "lookup":
        first = last = rng.randrange(lines)
    else:
        first, last = sorted(rng.sample(range(lines), 2))
    rhs: list[int | str] = []
    for i in range(lines):
        direct = [j for j in range(i) if isinstance(rhs[j], int) and j not in (first, last)]
        if task == "alias" and i == last:
            rhs.append(names[first])
        elif i not in (first, last) and direct and rng.random() < 0.2:
            rhs.append(names[rng.choice(direct)])
        else:
            rhs.append(values[i])
    if task == "update":  # the asked variable is assigned twice
        names[first] = names[last]
    code = [f"{n} = {v}" for n, v in zip(names, rhs, strict=True)]
    answer = rhs[last] if task == "update" else rhs[first]
    return {
        "id": f"{task}-{lines}l-{seed}-{split}-{index}",
        "task": task,
        "split": split,
        "context": "\n".join(code),
        "question": QUESTIONS[task].replace("{var}", names[last]),
        "var": names[last],
        "answer": str(answer),
        "needed": sorted({code[first], code[last]}, key=code.index),
        "depth": last / lines,
    }


def _shared_word_names(
    rng: random.Random, nouns: Sequence[str], suffixes: Sequence[str], n: int
) -> list[str]:
    """``n`` distinct ``noun_suffix`` names drawn from few words, so near-miss names share
    a word (``canyon_velvet``, ``canyon_melody``, ``sail_velvet``)."""
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        name = f"{rng.choice(nouns)}_{rng.choice(suffixes)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _scoped_item(
    rng: random.Random, pool: Sequence[str], split: str, index: int, seed: int, lines: int
) -> dict[str, Any]:
    """Classes sharing attribute names: ``n_classes`` blocks of ``attrs`` lines each."""
    n_classes = 4
    attrs = max(2, lines // n_classes)
    classes = [w.capitalize() for w in rng.sample(pool, n_classes)]
    names = rng.sample([w for w in pool if w.capitalize() not in classes], attrs)
    values = iter(rng.sample(range(1000, 10000), n_classes * attrs))
    blocks, table = [], {}
    for cls in classes:
        order = rng.sample(names, attrs)
        body = []
        for name in order:
            table[cls, name] = next(values)
            body.append(f"    {name} = {table[cls, name]}")
        blocks.append("\n".join([f"class {cls}:", *body]))
    cls, name = rng.choice(classes), rng.choice(names)
    var = f"{cls}.{name}"
    return {
        "id": f"scoped-{lines}l-{seed}-{split}-{index}",
        "task": "scoped",
        "split": split,
        "context": "\n\n".join(blocks),
        "question": QUESTIONS["scoped"].replace("{var}", var),
        "var": var,
        "answer": str(table[cls, name]),
        "needed": [f"class {cls}:", f"    {name} = {table[cls, name]}"],
        "depth": classes.index(cls) / n_classes,
    }


def _table_item(
    rng: random.Random, pool: Sequence[str], split: str, index: int, seed: int, lines: int
) -> dict[str, Any]:
    """A CSV table: a header line naming three value columns, then ``lines // 2`` rows.

    Only the header says which column a number is in, so a chunk holding the asked row
    but not the header cannot tell the asked value from the row's two other values.
    """
    n_rows, n_cols = max(2, lines // 2), 3
    columns = rng.sample(pool, n_cols)
    nouns = rng.sample([w for w in pool if w not in columns], max(3, n_rows // 2))
    suffixes = rng.sample([w for w in pool if w not in columns and w not in nouns], 8)
    rows = _shared_word_names(rng, nouns, suffixes, n_rows)
    values = iter(rng.sample(range(1000, 10000), n_rows * n_cols))
    cells = {row: [next(values) for _ in columns] for row in rows}
    header = ",".join(["name", *columns])
    body = [",".join([row, *map(str, cells[row])]) for row in rows]
    row, col = rng.randrange(n_rows), rng.randrange(n_cols)
    question = QUESTIONS["table"].replace("{column}", columns[col]).replace("{row}", rows[row])
    return {
        "id": f"table-{lines}l-{seed}-{split}-{index}",
        "task": "table",
        "split": split,
        "context": "\n".join([header, *body]),
        "question": question,
        "var": f"{rows[row]}.{columns[col]}",
        "answer": str(cells[rows[row]][col]),
        "needed": [header, body[row]],
        "depth": (row + 1) / (n_rows + 1),
    }


def make_items(settings: Settings) -> list[dict[str, Any]]:
    """Pilot and held-out items of every task."""
    out = []
    for task in settings.tasks:
        for split, n in (("pilot", settings.pilot_items), ("heldout", settings.items)):
            out += [make_item(task, split, i, settings.seed, settings.lines) for i in range(n)]
    return out


# ----------------------------------------------------------------------------- reader
class BatchedReader:
    """Greedy chat over a local causal LM with true batching (left padding) in ``chat_batch``.

    Each reply ends with `` (logprob X)``: the summed log-probability of the digit tokens
    the model generated (its confidence in the number it wrote; ``-99`` without digits).
    ``prompt_tokens`` and ``calls`` count the work done.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_tokens: int = 6) -> None:
        self.model, self.tok, self.max_tokens = model, tokenizer, max_tokens
        self.tok.padding_side = "left"
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ends = {tokenizer.eos_token_id, self.pad}
        gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        ends |= set(gen) if isinstance(gen, list) else {gen}
        self.ends = {t for t in ends if t is not None}
        self.prompt_tokens = 0
        self.calls = 0

    def chat_batch(
        self, conversations: Sequence[Sequence[dict[str, str]]], **options: Any
    ) -> list[str]:
        import torch

        texts = [
            self.tok.apply_chat_template(list(m), add_generation_prompt=True, tokenize=False)
            for m in conversations
        ]
        enc = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=int(options.get("max_tokens") or self.max_tokens),
                do_sample=False,
                pad_token_id=self.pad,
                output_scores=True,
                return_dict_in_generate=True,
            )
        self.prompt_tokens += int(enc["attention_mask"].sum())
        self.calls += len(conversations)
        new = out.sequences[:, enc["input_ids"].shape[1] :]
        logp = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1)
        chosen = logp.gather(-1, new[:, : logp.shape[1], None])[..., 0]
        replies = []
        for row, lp in zip(new.tolist(), chosen.tolist(), strict=True):
            n = next((i for i, t in enumerate(row) if t in self.ends), len(row))
            text = self.tok.decode(row[:n], skip_special_tokens=True).strip()
            digits = [v for t, v in zip(row[:n], lp[:n]) if self.tok.decode([t]).strip().isdigit()]
            replies.append(f"{text} (logprob {sum(digits) if digits else -99.0:.4f})")
        return replies

    def chat(self, messages: Sequence[dict[str, str]], **options: Any) -> str:
        return self.chat_batch([messages], **options)[0]


def parse_reply(reply: str) -> tuple[str, str | None, float]:
    """``(text, first four-digit number in it or None, log-probability of its digits)``."""
    m = CONFIDENCE.search(reply)
    text = reply[: m.start()] if m else reply
    number = NUMBER.search(text)
    return text.strip(), number.group(0) if number else None, float(m.group(1)) if m else -99.0


def vote(question: str, answers: Sequence[str]) -> str:
    """Majority vote over the numbers the workers wrote; ties: the most confident number.

    Replies without a number abstain; ``"none"`` when all abstain.
    """
    counts: dict[str, int] = {}
    confidence: dict[str, float] = {}
    for reply in answers:
        _, number, lp = parse_reply(reply)
        if number is not None:
            counts[number] = counts.get(number, 0) + 1
            confidence[number] = max(confidence.get(number, -math.inf), lp)
    if not counts:
        return "none"
    return max(counts, key=lambda k: (counts[k], confidence[k]))


# ---------------------------------------------------------------------------- records
class Records:
    """Append-only JSONL of cell results keyed by (task, item, size); a rerun skips them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interrupted write
                    continue
                self.rows[self.key(row)] = row

    @staticmethod
    def key(row: Mapping[str, Any]) -> tuple[str, str, str]:
        return (str(row["task"]), str(row["item"]), str(row["size"]))

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return key in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self.rows[self.key(row)] = row


def jobs(settings: Settings, items: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(item, size) cells in run order: pilot cells, then held-out items alternating tasks
    (each item at every size before the next), so a partial run stays paired and balanced."""
    pilot = [(it, str(s)) for it in items if it["split"] == "pilot" for s in settings.pilot_sizes]
    pilot += [(it, SINGLE) for it in items if it["split"] == "pilot"]
    held = {t: [it for it in items if it["split"] == "heldout" and it["task"] == t] for t in TASKS}
    order: list[tuple[dict[str, Any], str]] = []
    for i in range(settings.items):
        for task in settings.tasks:
            if i < len(held[task]):
                order += [(held[task][i], str(s)) for s in settings.sizes]
                order.append((held[task][i], SINGLE))
    return pilot + order


def run_cell(
    reader: Any, tokenizer: Any, item: dict[str, Any], size: str, settings: Settings
) -> dict[str, Any]:
    """Chunk-and-aggregate one item at one size; the record of what happened."""
    doc_tokens = count_units(item["context"], tokenizer)
    chunk = doc_tokens if size == SINGLE else int(size)
    config = ChunkingConfig(
        chunk_size=max(chunk, 1),
        worker_template=TEMPLATES[item["task"]],
        worker_options={"max_tokens": settings.max_tokens},
        batch_size=settings.batch,
        max_concurrency=1,
    )
    system = ChunkAndAggregate(reader, config, tokenizer=tokenizer, aggregator=vote)
    tokens0 = getattr(reader, "prompt_tokens", 0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = system.run(item["context"], item["question"])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    workers: list[dict[str, Any]] = []
    for w in result.workers:
        text, number, lp = parse_reply(w.answer)
        holds = [line in w.chunk.text for line in item["needed"]]
        workers.append({"reply": text, "number": number, "logprob": round(lp, 4), "holds": holds})
    return {
        "task": item["task"],
        "item": item["id"],
        "split": item["split"],
        "size": size,
        "chunk_size": chunk,
        "doc_tokens": doc_tokens,
        "n_workers": result.n_workers,
        "answer": result.answer,
        "gold": item["answer"],
        "correct": result.answer == item["answer"],
        "chain_whole": any(all(w["holds"]) for w in workers),
        "workers": workers,
        "prompt_tokens": getattr(reader, "prompt_tokens", 0) - tokens0,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
    }


def run_all(
    reader: Any,
    tokenizer: Any,
    settings: Settings,
    records: Records,
    *,
    deadline: float = math.inf,
    log: Callable[[str], None] = print,
) -> int:
    """Run every cell not yet in ``records``; stop before a cell once ``deadline`` (time.time) passed.

    Returns the number of cells run now.
    """
    items = make_items(settings)
    order = jobs(settings, items)
    todo = [(it, s) for it, s in order if (it["task"], it["id"], s) not in records]
    log(f"{len(order) - len(todo)} of {len(order)} cells already recorded; {len(todo)} to run")
    done = 0
    for item, size in todo:
        if time.time() >= deadline:
            log(f"time budget reached: {done} cells run, {len(todo) - done} left")
            break
        row = run_cell(reader, tokenizer, item, size, settings)
        records.add(row)
        done += 1
        log(
            f"[{len(records)}/{len(order)}] {row['item']:>20} size={size:>6} k={row['n_workers']:>2} "
            f"answer={row['answer']!r:>8} gold={row['gold']} ok={row['correct']} "
            f"{row['seconds']:.1f}s wall {row['cpu_seconds']:.1f}s cpu",
        )
    return done


# --------------------------------------------------------------------------- analysis
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval of a proportion ``k / n`` (``None`` when ``n == 0``)."""
    if n == 0:
        return None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> dict[str, Any]:
    """Exact two-sided McNemar test of paired outcomes: a right & b wrong vs the reverse."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} vs {len(b)}")
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return {"only_first": only_a, "only_second": only_b, "p": min(1.0, 2 * tail) if n else 1.0}


def size_key(size: str) -> float:
    return math.inf if size == SINGLE else float(size)


def cell_table(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Accuracy (95% Wilson), workers, cost and diagnostics per size, sizes ascending."""
    out: dict[str, dict[str, Any]] = {}
    for size in sorted({r["size"] for r in rows}, key=size_key):
        sub = [r for r in rows if r["size"] == size]
        n, k = len(sub), sum(bool(r["correct"]) for r in sub)
        holders = [w for r in sub for w in r["workers"] if all(w["holds"])]
        others = [w for r in sub for w in r["workers"] if not all(w["holds"])]
        lo_hi = wilson(k, n)
        out[size] = {
            "chunk_size": float(np.mean([r["chunk_size"] for r in sub])),
            "n_workers": float(np.mean([r["n_workers"] for r in sub])),
            "correct": k,
            "total": n,
            "accuracy": k / n,
            "wilson95": list(lo_hi) if lo_hi else None,
            "chain_whole_rate": float(np.mean([r["chain_whole"] for r in sub])),
            "holder_accuracy": (
                float(
                    np.mean(
                        [
                            w["number"] == r["gold"]
                            for r in sub
                            for w in r["workers"]
                            if all(w["holds"])
                        ]
                    )
                )
                if holders
                else None
            ),
            "non_holder_number_rate": (
                float(np.mean([w["number"] is not None for w in others])) if others else None
            ),
            "seconds_per_item": float(np.mean([r["seconds"] for r in sub])),
            "cpu_seconds_per_item": float(np.mean([r["cpu_seconds"] for r in sub])),
            "prompt_tokens_per_item": float(np.mean([r["prompt_tokens"] for r in sub])),
        }
    return out


def complete_items(
    rows: Sequence[dict[str, Any]], sizes: Sequence[str]
) -> dict[str, dict[str, bool]]:
    """Held-out items measured at every size: ``{item: {size: correct}}``."""
    by_item: dict[str, dict[str, bool]] = {}
    for r in rows:
        by_item.setdefault(r["item"], {})[r["size"]] = bool(r["correct"])
    return {i: v for i, v in sorted(by_item.items()) if all(s in v for s in sizes)}


def best_and_ties(
    outcomes: Mapping[str, Mapping[str, bool]], sizes: Sequence[str], alpha: float = 0.05
) -> tuple[str, list[str], dict[str, dict[str, Any]]]:
    """Measured best size (ties in accuracy: fewer workers, i.e. the larger size) and every
    size tied with it (same accuracy, or exact McNemar p > ``alpha`` on the paired items)."""
    items = list(outcomes)
    acc = {s: sum(outcomes[i][s] for i in items) for s in sizes}
    best = max(sizes, key=lambda s: (acc[s], size_key(s)))
    tests = {}
    ties = []
    for s in sizes:
        test = mcnemar([outcomes[i][best] for i in items], [outcomes[i][s] for i in items])
        tests[s] = test
        if s == best or acc[s] == acc[best] or test["p"] > alpha:
            ties.append(s)
    return best, ties, tests


def pilots_from(rows: Iterable[dict[str, Any]]) -> list[PilotResult]:
    """One pilot result per (item, size): the fit uses each document's own length."""
    return [
        PilotResult(
            max(1, min(r["chunk_size"], r["doc_tokens"])),
            r["doc_tokens"],
            int(bool(r["correct"])),
            1,
            n_workers=r["n_workers"],
        )
        for r in rows
    ]


def _model_dict(m: NoiseModel) -> dict[str, float]:
    return {
        "model_noise_a": m.model_noise,
        "growth_beta": m.growth,
        "aggregator_noise_gamma": m.aggregator_noise,
        "base_noise_delta": m.base_noise,
        "length_scale": m.length_scale,
        "optimal_chunk_length": m.optimal_chunk_length,
    }


def plan(pilot_rows: Sequence[dict[str, Any]], sizes: Sequence[int]) -> dict[str, Any] | None:
    """Fit the noise model to the pilot cells and recommend one of ``sizes`` or one pass."""
    if len({r["n_workers"] for r in pilot_rows}) < 2:
        return None
    doc = round(float(np.mean([r["doc_tokens"] for r in pilot_rows])))
    fit = fit_noise_model(pilots_from(pilot_rows), fit_base_noise=False, length_scale=doc)
    candidates = sorted({*(s for s in sizes if s < doc), doc})
    rec = recommend_chunking(fit.model, doc, chunk_sizes=candidates)
    by_k = {max(1, math.ceil(doc / c)): (SINGLE if c >= doc else str(c)) for c in candidates}
    return {
        "doc_tokens": doc,
        "fit": _model_dict(fit.model),
        "log_likelihood": fit.log_likelihood,
        "recommended": by_k[rec.n_workers],
        "recommendation": {
            "chunk": rec.chunk,
            "chunk_size": rec.chunk_size,
            "n_workers": rec.n_workers,
            "predicted_accuracy": rec.predicted_accuracy,
            "single_pass_accuracy": rec.single_pass_accuracy,
            "reason": rec.reason,
        },
        "predicted": {by_k[k]: {"n_workers": k, "accuracy": a} for k, c, a in rec.curve},
    }


def policy_name(size: str) -> str:
    return "one pass" if size == SINGLE else f"fixed {size} tokens"


def analyse(records: Records, settings: Settings) -> dict[str, Any]:
    """Per task: sweep, plan, best and ties; over the tasks: the planner vs fixed policies."""
    sizes = [*(str(s) for s in sorted(settings.sizes)), SINGLE]
    wanted = {it["id"] for it in make_items(settings)}  # these settings' items only
    rows = [r for r in records.rows.values() if r["item"] in wanted]
    tasks: dict[str, Any] = {}
    outcomes: dict[str, dict[str, dict[str, bool]]] = {}
    for task in settings.tasks:
        pilot = [r for r in rows if r["task"] == task and r["split"] == "pilot"]
        held = [r for r in rows if r["task"] == task and r["split"] == "heldout"]
        planned = plan(pilot, sorted(settings.sizes)) if pilot else None
        complete = complete_items(held, sizes)
        sweep = cell_table([r for r in held if r["item"] in complete])
        for size, row in sweep.items():
            predicted = (planned or {}).get("predicted", {}).get(size)
            row["planner_predicted"] = predicted["accuracy"] if predicted else None
        entry: dict[str, Any] = {
            "description": TASKS[task],
            "pilot_items": len({r["item"] for r in pilot}),
            "heldout_items_complete": len(complete),
            "pilot_cells": cell_table(pilot),
            "sweep_heldout": sweep,
            "planner": planned,
            "recommended": planned["recommended"] if planned else None,
            "measured_best": None,
            "tied_with_best": [],
            "recommendation_is_best": None,
            "recommendation_tied_best": None,
        }
        if complete:
            best, ties, tests = best_and_ties(complete, sizes)
            entry.update(measured_best=best, tied_with_best=ties, mcnemar_vs_best=tests)
            if planned is not None:
                outcomes[task] = complete
                rec = planned["recommended"]
                entry["recommendation_is_best"] = sweep[rec]["accuracy"] == sweep[best]["accuracy"]
                entry["recommendation_tied_best"] = rec in ties
        tasks[task] = entry
    return {"tasks": tasks, "policies": policies(tasks, outcomes, sizes)}


def policies(
    tasks: Mapping[str, Any],
    outcomes: Mapping[str, Mapping[str, Mapping[str, bool]]],
    sizes: Sequence[str],
) -> dict[str, Any] | None:
    """Accuracy over the tasks (pooled held-out items) of the planner and of fixed policies.

    Fixed: one pass, and every size. The fixed size best on the pooled items is named
    (hindsight). Oracle: each task's measured best (hindsight upper bound). Each row has
    the exact McNemar test of the planner against it, paired over the same items.
    """
    if not outcomes:
        return None
    pooled: dict[str, list[bool]] = {}
    per_task: dict[str, dict[str, float]] = {}
    chosen: dict[str, dict[str, str]] = {}

    def add(name: str, choose: Callable[[str], str]) -> None:
        pooled[name], per_task[name], chosen[name] = [], {}, {}
        for t, by_item in outcomes.items():
            size = choose(t)
            got = [by_item[i][size] for i in by_item]
            pooled[name] += got
            per_task[name][t] = sum(got) / len(got)
            chosen[name][t] = size

    def fixed(size: str) -> Callable[[str], str]:
        return lambda _task: size

    add("planner", lambda t: tasks[t]["recommended"])
    for s in sizes:
        add(policy_name(s), fixed(s))
    best_fixed = max(sizes, key=lambda s: (sum(pooled[policy_name(s)]), size_key(s)))
    add("per-task best (hindsight)", lambda t: tasks[t]["measured_best"])
    table: dict[str, dict[str, Any]] = {}
    for name, got in pooled.items():
        lo_hi = wilson(sum(got), len(got))
        table[name] = {
            "accuracy": sum(got) / len(got),
            "correct": sum(got),
            "total": len(got),
            "wilson95": list(lo_hi) if lo_hi else None,
            "per_task": per_task[name],
            "size_per_task": chosen[name],
            "mcnemar_planner_vs_this": None
            if name == "planner"
            else mcnemar(pooled["planner"], got),
        }
    best_name = policy_name(best_fixed)
    return {
        "tasks": list(outcomes),
        "best_fixed_in_hindsight": best_name,
        "planner_minus_best_fixed": table["planner"]["accuracy"] - table[best_name]["accuracy"],
        "planner_vs_best_fixed_p": table[best_name]["mcnemar_planner_vs_this"]["p"],
        "table": table,
    }


def summarise(
    records: Records,
    settings: Settings,
    out: Path,
    name: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``<name>.json`` and ``<name>.png`` from the records; return the summary."""
    result = {
        "question": "does the planner fitted on pilot items pick the best chunk size per task?",
        "model": f"{MODEL} (embedded GGUF, dequantized), greedy",
        "machine": f"{platform.machine()} CPU, torch threads=1",
        "settings": asdict(settings),
        "worker_templates": {task: TEMPLATES[task] for task in settings.tasks},
        "question_templates": QUESTIONS,
        "aggregator": "majority vote over the workers' numbers (ties: highest log-probability)",
        "tie_rule": "same held-out accuracy as the best, or exact McNemar p > 0.05 vs the best",
        "cells": len(records),
        "cost": {
            "cpu_seconds": sum(r["cpu_seconds"] for r in records.rows.values()),
            "wall_seconds": sum(r["seconds"] for r in records.rows.values()),
            "prompt_tokens": sum(r["prompt_tokens"] for r in records.rows.values()),
        },
        **(dict(extra) if extra else {}),
        **analyse(records, settings),
    }
    result = json_safe(result)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    plot(result, out / f"{name}.png")
    return result


def plot(result: Mapping[str, Any], path: Path) -> None:
    """Per task: held-out accuracy per chunk size (95% Wilson), the planner's predicted
    accuracy at the same sizes, its recommendation and the measured best.

    The sizes stand evenly spaced in ascending order, one pass last (labelled with its
    mean length and the workers per item).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["tasks"])
    fig, axes = plt.subplots(1, len(names), figsize=(5.6 * len(names), 4.4), squeeze=False)
    for ax, task in zip(axes[0], names, strict=True):
        entry = result["tasks"][task]
        planner = entry.get("planner") or {}
        keys = sorted(
            {*entry["sweep_heldout"], *entry["pilot_cells"], *planner.get("predicted", {})},
            key=size_key,
        )
        pos = {k: i for i, k in enumerate(keys)}
        for table, label, marker, shift in (
            (entry["sweep_heldout"], f"held-out ({entry['heldout_items_complete']} items)", "o", 0),
            (
                entry["pilot_cells"],
                f"pilot, the fit's input ({entry['pilot_items']} items)",
                "s",
                0.12,
            ),
        ):
            if not table:
                continue
            xs = [pos[k] + shift for k in table]
            ys = [v["accuracy"] for v in table.values()]
            lo = [y - (v["wilson95"] or [y, y])[0] for y, v in zip(ys, table.values(), strict=True)]
            hi = [(v["wilson95"] or [y, y])[1] - y for y, v in zip(ys, table.values(), strict=True)]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, capsize=3, label=label)
        if planner:
            pred = planner["predicted"]
            order = sorted(pred, key=size_key)
            ax.plot(
                [pos[k] for k in order],
                [pred[k]["accuracy"] for k in order],
                "-",
                marker=".",
                color="C2",
                label="planner's prediction (pilot fit)",
            )
            rec = planner["recommended"]
            ax.axvline(pos[rec], color="C2", alpha=0.25, lw=10, label=f"recommended: {rec}")
        best = entry.get("measured_best")
        if best and entry["sweep_heldout"]:
            ax.plot(
                [pos[best]],
                [entry["sweep_heldout"][best]["accuracy"]],
                "*",
                color="C3",
                ms=14,
                label=f"measured best: {best} (tied: {', '.join(entry['tied_with_best'])})",
            )
        labels = []
        for k in keys:
            row = entry["sweep_heldout"].get(k) or entry["pilot_cells"].get(k) or {}
            workers = f"\nk={row['n_workers']:.0f}" if row else ""
            if k == SINGLE:
                length = f" ({row['chunk_size']:.0f})" if row else ""
                labels.append(f"one pass{length}{workers}")
            else:
                labels.append(f"{k}{workers}")
        ax.set_xticks(range(len(keys)), labels)
        ax.set_xlim(-0.5, len(keys) - 0.5)
        ax.set_xlabel("chunk size (tokens per worker); k = workers per item")
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(entry["description"], fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"Chunk-and-aggregate with {MODEL}: planner vs measured sweep", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -------------------------------------------------------------------------------- CLI
def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Settings]:
    """Flags -> (namespace, validated settings); bad input exits with a clear message."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Settings()
    p.add_argument("--tasks", default=",".join(d.tasks), help=f"comma list of {sorted(TASKS)}")
    p.add_argument("--items", type=int, default=d.items, help="held-out items per task")
    p.add_argument("--pilot-items", type=int, default=d.pilot_items, help="pilot items per task")
    p.add_argument("--lines", type=int, default=d.lines, help="assignment lines per document")
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(d.sizes),
        help="chunk sizes (tokens); one pass is added",
    )
    p.add_argument(
        "--pilot-sizes",
        type=int,
        nargs="+",
        default=list(d.pilot_sizes),
        help="sizes the planner sees (plus one pass)",
    )
    p.add_argument("--batch", type=int, default=d.batch, help="workers per padded forward pass")
    p.add_argument(
        "--max-tokens", type=int, default=d.max_tokens, help="new tokens per worker reply"
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument(
        "--time-budget", type=float, default=math.inf, help="seconds; stop cleanly after"
    )
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument(
        "--name", default="chunking_planner_qwen", help="stem of the records, JSON and PNG"
    )
    p.add_argument(
        "--summarise", action="store_true", help="only rewrite JSON and PNG from the records"
    )
    args = p.parse_args(argv)
    if args.threads < 1:
        p.error(f"--threads={args.threads} is invalid: must be >= 1")
    if not (args.time_budget > 0):
        p.error(f"--time-budget={args.time_budget} is invalid: must be > 0 seconds")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", args.name):
        p.error(f"--name={args.name!r} is invalid: letters, digits, '_', '.', '-' only")
    try:
        settings = Settings(
            tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
            items=args.items,
            pilot_items=args.pilot_items,
            lines=args.lines,
            sizes=tuple(args.sizes),
            pilot_sizes=tuple(args.pilot_sizes),
            batch=args.batch,
            max_tokens=args.max_tokens,
            seed=args.seed,
        )
    except ValueError as exc:
        p.error(str(exc))
    return args, settings


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args, settings = parse_args(argv)
    records = Records(args.out / f"{args.name}_records.jsonl")
    extra: dict[str, Any] = {}
    if not args.summarise:
        import torch

        from lc_agents.models import load_model

        torch.manual_seed(0)
        torch.set_num_threads(args.threads)
        deadline = time.time() + args.time_budget
        t0 = time.perf_counter()
        model, tok = load_model(MODEL, dtype=args.dtype)
        extra["model_load_seconds"] = time.perf_counter() - t0
        extra["machine"] = f"{platform.machine()} CPU, torch threads={args.threads}"
        reader = BatchedReader(model, tok, max_tokens=settings.max_tokens)
        run_all(reader, tok, settings, records, deadline=deadline)
    extra["dtype"] = args.dtype
    result = summarise(records, settings, args.out, args.name, extra)
    for task, entry in result["tasks"].items():
        print(f"== {task}: {entry['heldout_items_complete']} held-out items complete")
        for size, row in entry["sweep_heldout"].items():
            print(
                f"  {size:>6}: {row['correct']}/{row['total']} = {row['accuracy']:.2f} "
                f"k={row['n_workers']:.1f} {row['cpu_seconds_per_item']:.1f} cpu-s/item"
            )
        print(
            f"  recommended={entry['recommended']} best={entry['measured_best']} "
            f"tied={entry['tied_with_best']}"
        )
    if result["policies"]:
        for name, row in result["policies"]["table"].items():
            print(f"  {name:>34}: {row['correct']}/{row['total']} = {row['accuracy']:.3f}")
    return result


if __name__ == "__main__":
    main()

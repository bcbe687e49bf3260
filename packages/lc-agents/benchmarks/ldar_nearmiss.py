"""LDAR vs top-k, the best fixed band and the whole context on look-alike facts.

Task (generated here, seeded, offline): each item asks for a year about one entity,
e.g. "In what year did the Varnholt Bridge open?". Its passages (in random order):

* ``gold``: a paragraph about the Varnholt Bridge stating the year in *other* words
  ("The first visitors came through the doors of the Varnholt Bridge in 1873.");
* ``near_miss`` (``--near-misses``, 3): paragraphs about look-alike entities (the
  Varnholt Mill, the Varnwick Bridge) stating *their* year in the question's own words
  ("The Varnholt Mill opened in 1921.");
* ``outdated`` (in ``--outdated-rate`` of the items): the question's wording about the
  entity itself with a superseded year ("Older guidebooks, now out of date, said the
  Varnholt Bridge opened in 1868.");
* ``filler``: paragraphs about other entities and their years, added until the passages
  hold ``--min-tokens`` reader tokens (8,192: the whole context costs real tokens).

MiniLM ranks the passages by cosine similarity to the question. The *near-miss rate*
is the share of questions where similarity puts a near-miss (or outdated) passage above
the gold one; the benchmark reports it, the rate at which top-1 is such a passage, and
the gold passage's rank histogram.

Reader: the embedded Qwen2.5-Coder-0.5B-Instruct scores candidate answers by
log-likelihood: the gold year, the near-miss and outdated years and random years up to
``--candidates`` (6, so chance is 1/6), each a 4-digit reply to the same prompt; the
most likely one is the answer. One prefill per condition and item (the prompt's KV
cache is reused across conditions sharing a prefix, e.g. top-1, top-2, ...), then one
batched forward over the candidates' digits; no decoding.

Conditions, on the same test items:

* ``ldar``: the band of the similarity ranking the trained LDAR head picks per question
  (trained on ``--train`` separate training items, every band answered offline);
* ``top_k``: the ``k`` most similar passages, ``k`` chosen by training accuracy
  (ties: fewer tokens);
* ``fixed_band``: the band (top-k or one skipping the first ranks) with the best
  training accuracy (ties: fewer tokens);
* ``band_classifier``: a simple learned baseline beside LDAR's head. One logistic
  regression per band on the top ranks' similarities and gaps
  (:func:`profile_vector`), fitted to that band's training correctness; each test
  question gets the band with the highest predicted accuracy;
* ``whole``: every passage, in similarity order (>= ``--min-tokens`` tokens);
* ``gold``: the gold passage only (the ceiling); ``oracle_band``: any band right.

Every band of the action set is answered for training and test items, so all the
choices above are read from the same records. Each answer is appended to
``<name>_records.jsonl`` keyed by (split, item, condition); a rerun skips what is there,
so an interrupted run resumes. ``--summarise`` rewrites the JSON and PNG from the
records. Accuracies with 95% Wilson intervals, paired McNemar tests of LDAR against each
condition (``lc_evals.report.compare``), passage tokens read per question.

Full run (>= 100 test items; all conditions):
    uv run python packages/lc-agents/benchmarks/ldar_nearmiss.py --device cuda
    OMP_NUM_THREADS=1 nice -n 15 uv run python packages/lc-agents/benchmarks/ldar_nearmiss.py
(CPU, one thread, float32: about 35 CPU-seconds of band answers per item and 4-5
CPU-minutes for each 8.7K-token whole context, about 13 CPU-hours for 200 training and
120 test items, 9 of them whole contexts. ``--dtype bfloat16`` about halves that, and
since the reader computes logits for the prompt's last position only an 8.2K-token
prompt takes about 100 CPU-seconds (``scoring_logits.py``). A GPU should take minutes,
not timed.)
On several cores, one process per core: add ``--shard 0/2`` to one and ``--shard 1/2`` to
the other (same options), then ``--summarise``.
Pilot (writes ``ldar_nearmiss_pilot.*``, not a result; about 45 min on the shared CPU):
    OMP_NUM_THREADS=1 nice -n 15 uv run python packages/lc-agents/benchmarks/ldar_nearmiss.py \\
        --name ldar_nearmiss_pilot --train 10 --test 24 --label-test 8 --whole-items 3
"""

from __future__ import annotations

import argparse
import fcntl
import json
import platform
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _report import json_safe

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-ldar"

# ------------------------------------------------------------------------------ items
FIRST = ["Varn", "Drel", "Oster", "Kell", "Brenn", "Mar", "Tals", "Hov"]
FIRST += ["Quen", "Ald", "Pell", "Sorn", "Wex", "Tir", "Gald", "Ness"]
SECOND = ["holt", "wick", "by", "mere", "stead", "ford", "dale", "ton", "brook", "field"]
TYPES = ["Bridge", "Library", "Observatory", "Museum", "Lighthouse", "Theatre", "Mill"]
TYPES += ["Chapel", "Station", "Market", "Tower", "Gallery"]


@dataclass(frozen=True)
class Attribute:
    """A year-valued fact: the question, its wording, paraphrases and an outdated form."""

    key: str
    question: str
    stated: str  # the question's own wording (near misses)
    paraphrases: tuple[str, ...]  # the gold passage's wording
    outdated: str


ATTRIBUTES = (
    Attribute(
        "open",
        "In what year did the {e} open?",
        "The {e} opened in {y}.",
        (
            "The first visitors came through the doors of the {e} in {y}.",
            "Crowds gathered on the day the {e} welcomed its first guests, in {y}.",
        ),
        "Older guidebooks, now out of date, said the {e} opened in {y}.",
    ),
    Attribute(
        "build",
        "In what year was the {e} built?",
        "The {e} was built in {y}.",
        (
            "Masons set the final stone of the {e} in {y}.",
            "Crews finished construction work on the {e} in {y}.",
        ),
        "An early survey, since corrected, recorded that the {e} was built in {y}.",
    ),
    Attribute(
        "renovate",
        "In what year was the {e} renovated?",
        "The {e} was renovated in {y}.",
        (
            "Workers restored the {e} from top to bottom in {y}.",
            "A long programme of repairs to the {e} ended in {y}.",
        ),
        "A superseded council report said the {e} was renovated in {y}.",
    ),
    Attribute(
        "close",
        "In what year did the {e} close?",
        "The {e} closed in {y}.",
        (
            "The {e} shut its doors for good in {y}.",
            "The last visitors left the {e} for good in {y}.",
        ),
        "A notice, later withdrawn, claimed the {e} closed in {y}.",
    ),
    Attribute(
        "sell",
        "In what year was the {e} sold?",
        "The {e} was sold in {y}.",
        (
            "Ownership of the {e} passed to the city in {y}.",
            "The {e} changed hands in {y}, when a trust bought it.",
        ),
        "An old register, since found wrong, said the {e} was sold in {y}.",
    ),
)

LANDMARKS = ["river", "harbour", "old square", "rail yard", "north gate", "cathedral", "park"]
PARTS = ["roof", "front door", "stair rail", "clock face", "weather vane", "main hall"]
COLOURS = ["green", "dark red", "pale blue", "white", "ochre", "slate grey"]
MATERIALS = ["local oak", "grey granite", "red sandstone", "cast iron", "limestone"]
PEOPLE = ["Ada Quill", "Tomas Reyne", "Elin Marsh", "Oskar Vell", "Greta Holm", "Piet Arden"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
FILLER_SENTENCES = (
    "The {x} stands {n} metres from the {landmark}.",
    "Its {part} is painted {colour}.",
    "Local guides say the {x} is best seen from the {landmark}.",
    "A small plaque by the entrance names {person} as its first keeper.",
    "In winter, visitors are admitted to the {x} only on {day}s.",
    "The {x} has {n} windows facing the {landmark}.",
    "Its {part} was made from {material}.",
    "School groups often sketch the {part} of the {x}.",
)

KINDS = ("gold", "near_miss", "outdated", "filler")


@dataclass(frozen=True)
class FactItem:
    """One question with its passages.

    Attributes:
        id: item id (``<split>-<index>``).
        question: the question (names the entity and the attribute).
        passages: the passages, in random order.
        kinds: per passage, one of :data:`KINDS`.
        answer: the gold year.
        candidates: the years the reader chooses from (the answer among them).
    """

    id: str
    question: str
    passages: tuple[str, ...]
    kinds: tuple[str, ...]
    answer: str
    candidates: tuple[str, ...]

    @property
    def gold_index(self) -> int:
        return self.kinds.index("gold")

    @property
    def misleading(self) -> list[int]:
        """Indices of the near-miss and outdated passages."""
        return [i for i, k in enumerate(self.kinds) if k in ("near_miss", "outdated")]


def _paragraph(rng: random.Random, entity: str, fact: str, n_filler: int) -> str:
    fillers = rng.sample(FILLER_SENTENCES, n_filler)
    sentences = [
        s.format(
            x=entity,
            n=rng.randint(12, 480),
            landmark=rng.choice(LANDMARKS),
            part=rng.choice(PARTS),
            colour=rng.choice(COLOURS),
            person=rng.choice(PEOPLE),
            day=rng.choice(DAYS),
            material=rng.choice(MATERIALS),
        )
        for s in fillers
    ]
    sentences.insert(rng.randint(0, len(sentences)), fact)
    return " ".join(sentences)


def _words(text: str) -> int:
    return len(text.split())


def make_item(
    split: str,
    index: int,
    *,
    seed: int = 0,
    near_misses: int = 3,
    outdated_rate: float = 0.5,
    min_tokens: int = 8192,
    n_candidates: int = 6,
    count_tokens: Callable[[str], int] = _words,
) -> FactItem:
    """The item ``index`` of ``split`` (deterministic in ``(seed, split, index)``).

    Fillers are added until ``count_tokens`` summed over the passages reaches
    ``min_tokens``.
    """
    if near_misses < 1 or not 0 <= outdated_rate <= 1 or n_candidates < 2 + near_misses:
        raise ValueError(
            f"need near_misses >= 1, 0 <= outdated_rate <= 1, n_candidates >= near_misses + 2;"
            f" got {near_misses}, {outdated_rate}, {n_candidates}"
        )
    rng = random.Random(f"ldar-nearmiss:{seed}:{split}:{index}")
    first, second = rng.choice(FIRST), rng.choice(SECOND)
    kind = rng.choice(TYPES)
    entity = f"{first}{second} {kind}"
    attr = rng.choice(ATTRIBUTES)
    years = rng.sample(range(1820, 1990), n_candidates + 40)
    answer, used = years[0], 1
    passages: list[tuple[str, str]] = []
    gold_fact = rng.choice(attr.paraphrases).format(e=entity, y=answer)
    passages.append(("gold", _paragraph(rng, entity, gold_fact, rng.randint(2, 4))))
    # look-alikes: same name, other type; same type, a name sharing the first syllable
    other_types = rng.sample([t for t in TYPES if t != kind], near_misses)
    other_second = rng.sample([s for s in SECOND if s != second], near_misses)
    wrong: list[int] = []
    for j in range(near_misses):
        look = (
            f"{first}{other_second[j]} {kind}"
            if j % 3 == 2
            else f"{first}{second} {other_types[j]}"
        )
        y = years[used]
        used += 1
        wrong.append(y)
        fact = attr.stated.format(e=look, y=y)
        passages.append(("near_miss", _paragraph(rng, look, fact, rng.randint(2, 4))))
    if rng.random() < outdated_rate:
        y = years[used]
        used += 1
        wrong.append(y)
        fact = attr.outdated.format(e=entity, y=y)
        passages.append(("outdated", _paragraph(rng, entity, fact, rng.randint(2, 4))))
    total = sum(count_tokens(p) for _, p in passages)
    while total < min_tokens:
        other = f"{rng.choice(FIRST)}{rng.choice(SECOND)} {rng.choice(TYPES)}"
        if other.split()[0].startswith(first):
            continue
        a = rng.choice(ATTRIBUTES)
        text = rng.choice([a.stated, *a.paraphrases]).format(e=other, y=rng.randint(1820, 1989))
        p = _paragraph(rng, other, text, rng.randint(3, 5))
        passages.append(("filler", p))
        total += count_tokens(p)
    rng.shuffle(passages)
    extra = [y for y in years[used:] if y not in wrong][: n_candidates - 1 - len(wrong)]
    cands = [str(y) for y in [answer, *wrong, *extra]]
    rng.shuffle(cands)
    return FactItem(
        f"{split}-{index:04d}",
        attr.question.format(e=entity),
        tuple(p for _, p in passages),
        tuple(k for k, _ in passages),
        str(answer),
        tuple(cands),
    )


# ---------------------------------------------------------------------- near-miss rate
def gold_rank(similarities: Sequence[float], gold: int) -> int:
    """Rank of passage ``gold`` (0 = most similar; ties put ``gold`` after the others)."""
    s = np.asarray(similarities, dtype=np.float64)
    return int(np.sum(s >= s[gold]) - 1)


def near_miss_stats(
    profiles: Iterable[tuple[Sequence[float], Sequence[str]]], *, max_rank: int = 10
) -> dict[str, Any]:
    """How often similarity prefers a misleading passage to the gold one.

    Args:
        profiles: per question, the similarity of each passage and its kind
            (:data:`KINDS`).
        max_rank: gold ranks at or beyond it share the histogram's last bin.

    Returns:
        ``{"n", "near_miss_above_gold", "top1_misleading", "top1_not_gold",
        "gold_rank_histogram"}`` (rates in [0, 1]; a tie counts against the gold).
    """
    above = top1_mis = top1_other = 0
    hist = [0] * (max_rank + 1)
    n = 0
    for sims, kinds in profiles:
        s = np.asarray(sims, dtype=np.float64)
        if len(s) != len(kinds) or list(kinds).count("gold") != 1:
            raise ValueError("each profile needs one similarity per passage and one gold")
        g = list(kinds).index("gold")
        mis = [i for i, k in enumerate(kinds) if k in ("near_miss", "outdated")]
        above += int(bool(mis) and float(np.max(s[mis])) >= s[g])
        r = gold_rank(s, g)
        hist[min(r, max_rank)] += 1
        top = int(np.argmax(s))
        if r > 0:
            top1_other += 1
            top1_mis += int(
                kinds[top] in ("near_miss", "outdated")
                or (s[top] == s[g] and bool(mis) and float(np.max(s[mis])) >= s[g])
            )
        n += 1
    if n == 0:
        raise ValueError("no profiles")
    return {
        "n": n,
        "near_miss_above_gold": above / n,
        "top1_misleading": top1_mis / n,
        "top1_not_gold": top1_other / n,
        "gold_rank_histogram": hist,
    }


# ----------------------------------------------------------------------------- reader
SYSTEM = "Answer the question from the passages. Reply with the year only."


class CandidateReader:
    """Scores candidate replies by log-likelihood after a chat prompt.

    Through :meth:`~lc_agents.backends.LocalBackend.score_continuations`: the KV cache
    of the last prompt is kept and the next prompt reuses its longest common prefix
    (bands ``[0,1)``, ``[0,2)``, ... share their first passages), so each condition
    costs a forward over its new tokens, then one batched forward per candidate length.

    Args:
        model, tokenizer: a causal LM (eval mode) and its tokenizer with a chat template.
        device: torch device of the model.
    """

    def __init__(self, model: Any, tokenizer: Any, device: str = "cpu") -> None:
        from lc_agents.backends import LocalBackend

        self.backend = LocalBackend(model, tokenizer, device=device)
        self.tokenizer = tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def passage_tokens(self, passages: Sequence[str]) -> int:
        """Tokens of the numbered passages block."""
        return self.count_tokens("\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages)))

    def prompt_ids(self, question: str, passages: Sequence[str]) -> list[int]:
        from lc_agents.ldar import qa_messages

        return self.backend.prompt_ids(qa_messages(question, passages, system=SYSTEM))

    def scores(
        self, question: str, passages: Sequence[str], candidates: Sequence[str]
    ) -> list[float]:
        """Log-likelihood (nats) of each candidate as the whole reply's first tokens."""
        cands = [self.tokenizer.encode(c, add_special_tokens=False) for c in candidates]
        return self.backend.score_continuations(self.prompt_ids(question, passages), cands)


# ---------------------------------------------------------------------------- records
class Records:
    """Append-only JSONL keyed by (split, item, condition); a cut last line is skipped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interrupted write
                    continue
                self.rows[(r["split"], r["item"], r["condition"])] = r

    def get(self, split: str, item: str, condition: str) -> dict[str, Any] | None:
        return self.rows.get((split, item, condition))

    def add(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(json.dumps(row, allow_nan=False) + "\n")
            fh.flush()
            fcntl.flock(fh, fcntl.LOCK_UN)
        self.rows[(row["split"], row["item"], row["condition"])] = row


def check_reader(path: Path, reader: Mapping[str, Any], records: Records) -> None:
    """Keep one reader set-up per records file: record it on first use (records made
    before it existed were float32) and refuse a run whose set-up differs."""
    if path.exists():
        before = json.loads(path.read_text())
    elif records.rows:
        before = {"dtype": "float32"}
    else:
        before = dict(reader)
    if dict(before) != dict(reader):
        raise SystemExit(
            f"{path.name}: these records were made with {before}, not {dict(reader)}; "
            "use another --name for this set-up"
        )
    path.write_text(json.dumps(before) + "\n")


def action_bands(max_k: int = 6, skips: Sequence[int] = (1, 2), max_end: int = 5) -> list[Any]:
    """Top-k for ``k <= max_k`` and bands ``[s, e)`` with ``s in skips``, ``e <= max_end``."""
    from lc_agents.ldar import Band

    bands = {Band(0, k) for k in range(1, max_k + 1)}
    bands |= {Band(s, e) for s in skips for e in range(s + 1, max_end + 1)}
    return sorted(bands)


def profile(records: Records, split: str, item: FactItem, embedder: Any) -> dict[str, Any]:
    """The item's similarities (stored as a ``profile`` record)."""
    row = records.get(split, item.id, "profile")
    if row is None:
        from lc_agents.ldar import similarities

        sims = similarities(embedder, item.question, item.passages)
        row = {
            "split": split,
            "item": item.id,
            "condition": "profile",
            "similarities": [round(float(s), 6) for s in sims],
            "kinds": list(item.kinds),
        }
        records.add(row)
    return row


def answer(
    records: Records,
    reader: Any,
    split: str,
    item: FactItem,
    condition: str,
    passages: Sequence[str],
) -> dict[str, Any]:
    """The reader's answer for one (item, condition), from the records or computed."""
    row = records.get(split, item.id, condition)
    if row is not None:
        return row
    t = time.perf_counter()
    before = getattr(reader, "forwarded_tokens", 0)
    s = reader.scores(item.question, passages, item.candidates)
    best = int(np.argmax(s))
    row = {
        "split": split,
        "item": item.id,
        "condition": condition,
        "prediction": item.candidates[best],
        "correct": float(item.candidates[best] == item.answer),
        "scores": [round(float(v), 4) for v in s],
        "passages": len(passages),
        "tokens": int(reader.passage_tokens(passages)),
        "forwarded_tokens": int(getattr(reader, "forwarded_tokens", 0) - before),
        "seconds": round(time.perf_counter() - t, 3),
    }
    records.add(row)
    return row


def run_item(
    records: Records,
    reader: Any,
    embedder: Any,
    split: str,
    item: FactItem,
    bands: Sequence[Any],
    *,
    gold: bool,
    whole: bool,
) -> None:
    """Every band of ``item`` (and the gold passage / whole context when asked)."""
    sims = profile(records, split, item, embedder)["similarities"]
    order = np.argsort(-np.asarray(sims), kind="stable")
    ranked = [item.passages[int(i)] for i in order]
    for band in bands:
        answer(records, reader, split, item, str(band), ranked[band.start : band.end])
    if gold:
        answer(records, reader, split, item, "gold", [item.passages[item.gold_index]])
    if whole:
        answer(records, reader, split, item, "whole", ranked)


def run_stages(
    records: Records,
    reader: Any,
    embedder: Any,
    train_items: Sequence[FactItem],
    test_items: Sequence[FactItem],
    bands: Sequence[Any],
    *,
    label_test: int,
    whole_items: int,
    shard: tuple[int, int] = (0, 1),
) -> None:
    """Every stage in order: test similarities, training bands, test bands and gold, whole
    contexts. ``shard=(k, n)`` keeps the items whose index is ``k`` mod ``n`` in each
    stage, so ``n`` processes sharing the records file split the work without overlap."""
    from tqdm.auto import tqdm

    k, n = shard

    def mine(items: Sequence[FactItem]) -> list[FactItem]:
        return [it for i, it in enumerate(items) if i % n == k]

    tag = "" if n == 1 else f" [shard {k}/{n}]"
    for it in tqdm(mine(test_items), desc="similarities (test)" + tag):
        profile(records, "test", it, embedder)
    for it in tqdm(mine(train_items), desc="train (every band)" + tag):
        run_item(records, reader, embedder, "train", it, bands, gold=False, whole=False)
    for it in tqdm(mine(test_items[:label_test]), desc="test (bands, gold)" + tag):
        run_item(records, reader, embedder, "test", it, bands, gold=True, whole=False)
    for it in tqdm(mine(test_items[:whole_items]), desc="test (whole context)" + tag):
        run_item(records, reader, embedder, "test", it, [], gold=False, whole=True)


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)`` with ``0 <= K < N`` (argparse type; a clear error otherwise)."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N (e.g. 0/2)") from None
    if n < 1 or not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"{text!r}: need N >= 1 and 0 <= K < N")
    return k, n


# --------------------------------------------------------------------------- summary
def examples_from_records(
    records: Records, split: str, ids: Sequence[str], bands: Sequence[Any]
) -> list[Any]:
    """:class:`~lc_agents.ldar.LdarExample` of every item whose bands are all answered."""
    from lc_agents.ldar import LdarExample, sort_similarities

    out = []
    for i in ids:
        prof = records.get(split, i, "profile")
        rows = [records.get(split, i, str(b)) for b in bands]
        if prof is None or any(r is None for r in rows):
            continue
        sims, order = sort_similarities(prof["similarities"])
        correct = np.array([r["correct"] for r in rows if r is not None], dtype=np.float64)
        tokens = np.array([r["tokens"] for r in rows if r is not None], dtype=np.float64)
        out.append(LdarExample(i, sims, order, correct, tokens))
    return out


def best_band(examples: Sequence[Any], bands: Sequence[Any], allowed: Sequence[Any]) -> Any:
    """The allowed band with the best mean accuracy (ties: fewer mean tokens)."""
    acc = np.mean([e.correct for e in examples], axis=0)
    tok = np.mean([e.tokens for e in examples], axis=0)
    idx = [bands.index(b) for b in allowed]
    return bands[min(idx, key=lambda a: (-acc[a], tok[a]))]


def profile_vector(sorted_similarities: Sequence[float], top: int = 6) -> np.ndarray:
    """The ``top`` best similarities, the gaps between them and the best's margin over them."""
    s = np.asarray(sorted_similarities, dtype=np.float64)[:top]
    return np.concatenate([s, s[:-1] - s[1:], [s[0] - s.mean()]])


def fit_logistic(
    x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, steps: int = 2000, lr: float = 0.1
) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by full-batch gradient descent: ``(w, b)``.

    ``x`` [n, d] (standardised), ``y`` [n] in {0, 1}. Deterministic.
    """
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        w -= lr * (x.T @ (p - y) + l2 * w) / len(y)
        b -= lr * float(np.mean(p - y))
    return w, b


def band_classifier(
    train: Sequence[Any], test: Sequence[Any], bands: Sequence[Any]
) -> dict[str, Any]:
    """Per test id, the band whose logistic model predicts the highest accuracy.

    Ties go to the band with fewer mean training tokens.
    """
    x_train = np.array([profile_vector(e.similarities) for e in train])
    x_test = np.array([profile_vector(e.similarities) for e in test])
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-9
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    correct = np.array([e.correct for e in train])
    tokens = np.mean([e.tokens for e in train], axis=0)
    predicted = np.zeros((len(test), len(bands)))
    for j in range(len(bands)):
        w, b = fit_logistic(x_train, correct[:, j])
        predicted[:, j] = 1.0 / (1.0 + np.exp(-(x_test @ w + b)))
    order = np.lexsort((np.broadcast_to(tokens, predicted.shape), -predicted), axis=1)
    return {e.id: bands[int(order[n, 0])] for n, e in enumerate(test)}


def cross_validated(
    train: Sequence[Any], bands: Sequence[Any], fixed: Any, folds: int = 5
) -> dict[str, float]:
    """Held-out accuracy on the training items (``folds``-fold, item ``i`` in fold ``i %
    folds``) of the band classifier and of the fixed band ``fixed``: does the classifier's
    choice generalise beyond the items it was fit on?"""
    folds = min(folds, len(train))
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 training items, got {len(train)}")
    parts = [list(train[k::folds]) for k in range(folds)]
    right = []
    for k, held in enumerate(parts):
        fit_on = [e for j, part in enumerate(parts) if j != k for e in part]
        chosen = band_classifier(fit_on, held, bands)
        right += [float(e.correct[bands.index(chosen[e.id])]) for e in held]
    return {
        "folds": folds,
        "band_classifier": float(np.mean(right)),
        "fixed_band": float(np.mean([e.correct[bands.index(fixed)] for e in train])),
    }


def summarise(
    records: Records,
    train_ids: Sequence[str],
    test_ids: Sequence[str],
    bands: Sequence[Any],
    args: Mapping[str, Any],
    out: Path,
    name: str,
) -> dict[str, Any]:
    """Train LDAR, choose the baselines on the training items, score the test items."""
    from lc_agents.ldar import Band, LdarConfig, LdarRetriever
    from lc_evals.report import compare, interval
    from lc_evals.results import Result

    train = examples_from_records(records, "train", train_ids, bands)
    test = examples_from_records(records, "test", test_ids, bands)
    if not train or not test:
        raise SystemExit(f"need answered items: {len(train)} training, {len(test)} test")
    config = LdarConfig(
        token_penalty=float(args["token_penalty"]),
        epochs=int(args["epochs"]),
        seed=int(args["seed"]),
    )
    ldar = LdarRetriever(bands, config)
    losses = ldar.fit(train)
    ldar.save(out / f"{name}_head.pt")
    top_k = best_band(train, bands, [b for b in bands if b.start == 0])
    fixed = best_band(train, bands, bands)
    choice = {e.id: ldar.choose(e.similarities) for e in test}
    classified = band_classifier(train, test, bands)

    def band_row(i: str, band: Band) -> dict[str, Any]:
        row = records.get("test", i, str(band))
        assert row is not None
        return row

    conditions: dict[str, dict[str, dict[str, Any]]] = {
        "ldar": {e.id: band_row(e.id, choice[e.id]) for e in test},
        "top_k": {e.id: band_row(e.id, top_k) for e in test},
        "fixed_band": {e.id: band_row(e.id, fixed) for e in test},
        "band_classifier": {e.id: band_row(e.id, classified[e.id]) for e in test},
    }
    for cond in ("whole", "gold"):
        rows = {e.id: records.get("test", e.id, cond) for e in test}
        conditions[cond] = {i: r for i, r in rows.items() if r is not None}
    results = {
        cond: [
            Result(i, "ldar_nearmiss", r["prediction"], float(r["correct"]), "exact_year", ())
            for i, r in rows.items()
        ]
        for cond, rows in conditions.items()
        if rows
    }
    methods: dict[str, Any] = {}
    for cond, rows in conditions.items():
        if not rows:
            methods[cond] = {"n": 0}
            continue
        iv = interval([float(r["correct"]) for r in rows.values()])
        methods[cond] = {
            "n": len(rows),
            "accuracy": iv["score"],
            "ci_low": iv["ci_low"],
            "ci_high": iv["ci_high"],
            "tokens_per_question": float(np.mean([r["tokens"] for r in rows.values()])),
            "seconds_per_question": float(np.mean([r["seconds"] for r in rows.values()])),
        }
    methods["oracle_band"] = {
        "n": len(test),
        "accuracy": float(np.mean([np.max(e.correct) for e in test])),
    }
    comparisons = {
        f"ldar_vs_{cond}": compare(results["ldar"], results[cond])
        for cond in results
        if cond != "ldar"
    }
    if "whole" in results:
        comparisons["top_k_vs_whole"] = compare(results["top_k"], results["whole"])

    def profiles(split: str, ids: Sequence[str]) -> list[tuple[list[float], list[str]]]:
        rows = [records.get(split, i, "profile") for i in ids]
        return [(r["similarities"], r["kinds"]) for r in rows if r is not None]

    train_acc = np.mean([e.correct for e in train], axis=0)
    whole_tokens = [r["tokens"] for k, r in records.rows.items() if k[2] == "whole"]
    report = {
        "benchmark": name,
        "pilot": "pilot" in name,
        "machine": args.get("machine"),
        "model": "Qwen2.5-Coder-0.5B-Instruct (embedded), candidate years scored by log-likelihood",
        "embedder": "all-MiniLM-L6-v2",
        "chance": 1.0 / int(args["candidates"]),
        "args": {k: v for k, v in args.items() if k != "machine"},
        "bands": [str(b) for b in bands],
        "n_train": len(train),
        "n_test": len(test),
        "near_miss": near_miss_stats(profiles("test", test_ids)),
        "near_miss_train": near_miss_stats(profiles("train", train_ids)),
        "whole_context_tokens": {
            "min": min(whole_tokens) if whole_tokens else None,
            "mean": float(np.mean(whole_tokens)) if whole_tokens else None,
        },
        "chosen": {"top_k": str(top_k), "fixed_band": str(fixed)},
        "train_accuracy_per_band": {
            str(b): float(a) for b, a in zip(bands, train_acc, strict=True)
        },
        "ldar_choices": {str(b): sum(c == b for c in choice.values()) for b in bands},
        "band_classifier_cv_train": cross_validated(train, bands, fixed),
        "band_classifier_choices": {
            str(b): sum(c == b for c in classified.values()) for b in bands
        },
        "methods": methods,
        "comparisons": comparisons,
        "final_loss": losses[-1],
    }
    report = json_safe(report)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1, allow_nan=False) + "\n")
    plot(report, out / f"{name}.png")
    return report


def plot(report: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colours = {"ldar": "tab:red", "top_k": "tab:blue", "fixed_band": "tab:green"}
    colours["band_classifier"] = "tab:purple"
    colours |= {"whole": "black", "gold": "tab:gray"}
    chosen = report["chosen"]
    points: dict[tuple[float, float, int], list[str]] = {}  # methods at one point share a label
    for cond, m in report["methods"].items():
        if cond == "oracle_band" or not m.get("n") or m.get("tokens_per_question") is None:
            continue
        x, y = m["tokens_per_question"], m["accuracy"]
        ax.errorbar(
            x,
            y,
            yerr=[[y - m["ci_low"]], [m["ci_high"] - y]],
            fmt="o",
            color=colours[cond],
            capsize=3,
        )
        label = f"{cond} {chosen[cond]}" if cond in chosen else cond
        points.setdefault((round(x, 6), round(y, 6), m["n"]), []).append(label)
    for (x, y, n), labels in points.items():
        ax.annotate(
            f"{' = '.join(labels)} (n={n})",
            (x, y),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
        )
    ax.axhline(report["chance"], color="gray", ls=":", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("passage tokens read per question")
    ax.set_ylabel("accuracy (95% Wilson interval)")
    ax.set_ylim(-0.05, 1.05)
    nm = report["near_miss"]
    title = "pilot, " if report.get("pilot") else ""
    ax.set_title(
        f"{title}look-alike facts, Qwen2.5-Coder-0.5B; near miss above gold "
        f"{nm['near_miss_above_gold']:.0%}",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--name", default="ldar_nearmiss", help="output file stem")
    ap.add_argument("--train", type=int, default=200, help="training items (LDAR, k, band)")
    ap.add_argument("--test", type=int, default=120, help="test items (similarities for all)")
    ap.add_argument("--label-test", type=int, default=None, help="test items answered (all)")
    ap.add_argument(
        "--whole-items", type=int, default=None, help="test items given the whole context (all)"
    )
    ap.add_argument("--near-misses", type=int, default=3)
    ap.add_argument("--outdated-rate", type=float, default=0.5)
    ap.add_argument("--min-tokens", type=int, default=8192)
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--max-k", type=int, default=6)
    ap.add_argument("--max-end", type=int, default=5, help="end of the bands skipping ranks")
    ap.add_argument("--token-penalty", type=float, default=0.1)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--dtype",
        default="float32",
        help="reader weights (float32 or bfloat16, about 2x faster on CPU); one dtype per --name",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        metavar="K/N",
        help="run only items with index K mod N (N processes share the records; then --summarise)",
    )
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--summarise", action="store_true", help="only rewrite JSON/PNG from records")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model
    from lc_agents.retrieval import MiniLMEmbedder

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = Records(out / f"{args.name}_records.jsonl")
    check_reader(out / f"{args.name}_reader.json", {"dtype": args.dtype}, records)
    t0 = time.time()
    model, tokenizer = load_model("qwen2.5-coder-0.5b-instruct", dtype=args.dtype)
    model.to(args.device)
    reader = CandidateReader(model, tokenizer, args.device)
    embedder = MiniLMEmbedder(device=args.device)
    settings = dict(
        seed=args.seed,
        near_misses=args.near_misses,
        outdated_rate=args.outdated_rate,
        min_tokens=args.min_tokens,
        n_candidates=args.candidates,
        count_tokens=reader.count_tokens,
    )
    train_items = [make_item("train", i, **settings) for i in range(args.train)]
    test_items = [make_item("test", i, **settings) for i in range(args.test)]
    bands = action_bands(args.max_k, (1, 2), args.max_end)
    label_test = args.test if args.label_test is None else args.label_test
    whole_n = label_test if args.whole_items is None else args.whole_items
    if not args.summarise:
        run_stages(
            records,
            reader,
            embedder,
            train_items,
            test_items,
            bands,
            label_test=label_test,
            whole_items=whole_n,
            shard=args.shard,
        )
        if args.shard != (0, 1):
            k, n = args.shard
            print(
                f"shard {k}/{n} done; once every shard is, write the JSON and PNG with "
                "--summarise (same --name and sizes)"
            )
            return
    meta = vars(args) | {
        "machine": f"{platform.machine()} {args.device}, {args.threads} thread(s)",
        "seconds": time.time() - t0,
    }
    report = summarise(
        records,
        [it.id for it in train_items],
        [it.id for it in test_items],
        bands,
        meta,
        out,
        args.name,
    )
    print(json.dumps({k: report[k] for k in ("near_miss", "chosen", "methods")}, indent=1))


if __name__ == "__main__":
    main()

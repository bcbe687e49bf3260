"""ACE against no memory, a rewritten cheatsheet and the true rules, on threshold routing.

Task (generated here, seeded): refund tickets for products with codes such as ``KD-37``
go to a queue that depends on the product and on whether the amount is under a
per-product threshold. Every rule has the same wording and differs from the others
only in numbers and identifiers::

    Refund requests for KD-37 under $120 go to queue R4.
    Refund requests for KD-37 of $120 or more go to queue M7.

Eight products (``--products``) give 16 rules and 16 queue codes. The training stream
(``--train``, 32 items by default: each rule twice) first shows only the rules of the
*early* half of the products, then only those of the *late* half; each item comes with
ground-truth feedback: the right queue and the rule that decides it (ACE's offline
setting with labels). The held-out test tickets (``--test``, 80; new amounts) are 3/4
early-rule tickets, whose rules were last taught at least half a stream before the end.

Conditions, on the same test tickets, answered by the embedded
Qwen2.5-Coder-0.5B-Instruct (offline) scored by log-likelihood: every queue code is a
candidate answer after ``Queue:`` and the most likely one is the prediction (the notes
prefix is cached, so a test ticket costs one short forward plus one batched forward for
the codes' second tokens):

* ``base``: no notes;
* ``ace``: the playbook built over the stream by the model as curator: after each item,
  the curator (:class:`~lc_agents.ace.Curator`, the model, replying in JSON delta
  operations) folds the item's lesson into the playbook; proactive de-duplication with
  MiniLM (which leaves bullets naming different numbers or identifiers apart). With
  ``--reflector feedback`` (default, to keep CPU cost possible) the lesson is the
  feedback's stated rule; ``--reflector model`` asks the model as reflector first. No
  fallback: an unparseable curator reply adds nothing;
* ``ace_add``: the same with the curator limited to ADD operations (as the reference
  implementation of ACE applies only ADDs);
* ``rewrite``: a Dynamic-Cheatsheet-style memory: after each item the model rewrites one
  cheatsheet, bounded by ``--rewrite-tokens`` new tokens (default 40: about what the
  curator writes per step);
* ``rewrite_long``: the same with room for the whole rule set
  (``--rewrite-long-tokens``, default 320), at the cost of writing it out every step;
* ``oracle``: the 24 true rules as notes: the ceiling of this answerer.

Retention: after every update, the share of the rules seen so far (and of the early
rules) whose product code, threshold and queue code still stand together on one line
of the memory, with the queue on the rule's side of the threshold (:func:`side_of`).

Each training step and each test answer is appended to
``ace_routing_records.jsonl`` keyed by (phase, condition, seed, item); a rerun skips
them and restores the memories from the last training record, so an interrupted run
resumes. ``--summarise`` rewrites ``ace_routing.json`` and ``ace_routing.png`` from the
records.

Run (shared 2-core CPU; see docs/benchmarks/lc-agents-ace.md for times), as three
processes side by side that share the records file:
    nice -n 5 uv run python packages/lc-agents/benchmarks/ace_routing.py --conditions ace &
    nice -n 5 uv run python packages/lc-agents/benchmarks/ace_routing.py --conditions rewrite &
    nice -n 5 uv run python packages/lc-agents/benchmarks/ace_routing.py --conditions oracle,base &
    nice -n 5 uv run python packages/lc-agents/benchmarks/ace_routing.py --conditions ace_add
At full size (24 rules, 100 updates, 100 test tickets, three task seeds, bfloat16;
about 35 CPU-minutes per seed)::

    nice -n 5 uv run python packages/lc-agents/benchmarks/ace_routing.py --seeds 0,1,2 \\
        --conditions ace_add,rewrite,base,oracle --products 12 --train 100 --test 100 \\
        --dtype bfloat16 --name ace_routing_full

Pilot: ``--train 16 --test 6 --out /tmp/ace-pilot``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import platform
import random
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from lc_agents.ace import (
    DEFAULT_PROMPTS,
    Curator,
    PlaybookStore,
    Reflection,
    Reflector,
    deduplicate,
)
from lc_agents.ace.roles import Generation

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-ace"
CONDITIONS = ("base", "ace", "ace_add", "rewrite", "rewrite_long", "oracle")
LEARNED = ("ace", "ace_add", "rewrite", "rewrite_long")
PLAYBOOKS = ("ace", "ace_add")
SECTION = "routing"

TEMPLATES = (
    "Customer asks for a refund of ${amount} on their {product}.",
    "Refund request: {product}, amount ${amount}.",
    "I want my ${amount} back for the {product} I bought.",
    "Please refund ${amount} for my {product} order.",
    "Refund needed: ${amount}, product {product}.",
)
SYSTEM = (
    "You route customer support tickets to queues. The notes, if any, were collected "
    "from earlier tickets."
)
USER = "Notes:\n{memory}\n\nTicket: {ticket}\nWhich queue handles this ticket?"
ASSISTANT_PREFIX = "Queue:"


# ---------------------------------------------------------------------------- task
@dataclass(frozen=True)
class Rule:
    """One routing rule: refunds for ``product`` under (or at least) ``threshold`` go to ``queue``."""

    product: str
    threshold: int
    side: str  # "under" or "over"
    queue: str
    group: str  # "early" or "late"

    def text(self) -> str:
        """The rule in words (all rules share this wording)."""
        cond = (
            f"under ${self.threshold}" if self.side == "under" else f"of ${self.threshold} or more"
        )
        return f"Refund requests for {self.product} {cond} go to queue {self.queue}."

    def applies(self, product: str, amount: int) -> bool:
        """Whether a refund of ``amount`` for ``product`` falls under this rule."""
        if product != self.product:
            return False
        return amount < self.threshold if self.side == "under" else amount >= self.threshold


@dataclass(frozen=True)
class Ticket:
    """A refund ticket with its answer and the rule that decides it."""

    id: str
    text: str
    product: str
    amount: int
    answer: str
    rule: int
    group: str

    def feedback(self, prediction: str, rules: Sequence[Rule]) -> str:
        """Ground-truth feedback: the verdict, the right queue and the deciding rule."""
        truth = f"Correct queue: {self.answer}. Rule: {rules[self.rule].text()}"
        if not prediction:  # no attempt was made
            return truth
        verdict = "correct" if prediction == self.answer else f"wrong (answered {prediction})"
        return f"{verdict}. {truth}"


@dataclass(frozen=True)
class RoutingTask:
    """Rules, the training stream (early rules first) and the held-out test tickets."""

    seed: int
    rules: tuple[Rule, ...]
    train: tuple[Ticket, ...]
    test: tuple[Ticket, ...]

    @property
    def queues(self) -> list[str]:
        """Every queue code (the candidate answers), sorted."""
        return sorted(r.queue for r in self.rules)

    def last_seen(self) -> dict[int, int]:
        """Rule index -> position of its last training item."""
        return {t.rule: i for i, t in enumerate(self.train)}


def _amount(rng: random.Random, rule: Rule) -> int:
    t = rule.threshold
    if rule.side == "under":
        return rng.randint(max(5, int(t * 0.3)), t - 1)
    return rng.randint(t, 2 * t)


def make_routing_task(
    seed: int = 0,
    *,
    n_products: int = 8,
    n_train: int = 32,
    n_test: int = 80,
    early_share: float = 0.75,
) -> RoutingTask:
    """A seeded routing task: ``2 * n_products`` rules, a training stream, test tickets.

    The first half of the stream holds tickets of the first half of the products only
    (the *early* rules, each seen about equally often), the second half those of the
    other products; ``early_share`` of the test tickets need early rules. Test tickets
    never repeat a training (product, amount) pair.
    """
    if n_products < 2 or n_products % 2:
        raise ValueError(f"n_products must be an even number >= 2, got {n_products}")
    if n_products > 24:
        raise ValueError(f"n_products must be <= 24 (queue codes run out), got {n_products}")
    if n_train < n_products * 2:
        raise ValueError(f"n_train must be >= 2 * n_products ({2 * n_products}), got {n_train}")
    if n_test < 2:
        raise ValueError(f"n_test must be >= 2, got {n_test}")
    if not 0.0 <= early_share <= 1.0:
        raise ValueError(f"early_share must be in [0, 1], got {early_share}")
    rng = random.Random(seed)
    letters = "ABCDEFGHJKLMNPRSTVWXZ"
    products: list[str] = []
    while len(products) < n_products:
        code = f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randint(10, 99)}"
        if code not in products:
            products.append(code)
    thresholds = rng.sample(range(30, 400, 10), n_products)
    # codes like R4: three letters x digits 1..9, so every code is a letter and a digit
    qletters = rng.sample("KMRTVW", 3)
    codes = rng.sample([f"{c}{d}" for c in qletters for d in range(1, 10)], 2 * n_products)
    rules = []
    for i, (p, t) in enumerate(zip(products, thresholds, strict=True)):
        group = "early" if i < n_products // 2 else "late"
        rules.append(Rule(p, t, "under", codes[2 * i], group))
        rules.append(Rule(p, t, "over", codes[2 * i + 1], group))

    def ticket(idx: str, r: int, seen: set[tuple[str, int]]) -> Ticket:
        rule = rules[r]
        for _ in range(1000):
            amount = _amount(rng, rule)
            if (rule.product, amount) not in seen:
                break
        seen.add((rule.product, amount))
        text = rng.choice(TEMPLATES).format(amount=amount, product=rule.product)
        return Ticket(idx, text, rule.product, amount, rule.queue, r, rule.group)

    seen: set[tuple[str, int]] = set()
    train: list[Ticket] = []
    halves = (n_train // 2, n_train - n_train // 2)
    for group, size in zip(("early", "late"), halves, strict=True):
        members = [i for i, r in enumerate(rules) if r.group == group]
        order = [members[k % len(members)] for k in range(size)]
        rng.shuffle(order)
        train += [ticket(f"train-{len(train) + k:03d}", r, seen) for k, r in enumerate(order)]
    n_early = round(n_test * early_share)
    test: list[Ticket] = []
    for group, size in (("early", n_early), ("late", n_test - n_early)):
        members = [i for i, r in enumerate(rules) if r.group == group]
        order = [members[k % len(members)] for k in range(size)]
        rng.shuffle(order)
        test += [ticket(f"test-{len(test) + k:03d}", r, seen) for k, r in enumerate(order)]
    test_order = list(test)
    rng.shuffle(test_order)
    return RoutingTask(seed, tuple(rules), tuple(train), tuple(test_order))


# ---------------------------------------------------------------------------- retention
def _token(token: str) -> str:
    """A pattern for ``token`` as a whole code or number (``R4`` not in ``R41``, ``120``
    not in ``1200`` or ``120.5``)."""
    return rf"(?<![\w.-]){re.escape(token)}(?![\w-]|\.\d)"


def _has(line: str, token: str) -> bool:
    return re.search(_token(token), line) is not None


# The side of a threshold in words: "under $120" / "of $120 or more" and their variants.
_SIDES = (
    ("under", re.compile(r"\b(?:under|below|less than|lower than)\b|<(?!=)", re.I)),
    (
        "over",
        re.compile(
            r"\bor (?:more|above|higher|over)\b|\b(?:at least|above|over|more than)\b|>=|≥", re.I
        ),
    ),
)


def side_of(line: str, queue: str) -> str | None:
    """The threshold side a line gives ``queue``: the side phrase nearest before an
    occurrence of the queue code (after it, when none comes before); ``None`` without one.
    ``"KD-37 under $120 go to R4; of $120 or more go to M7"`` gives R4 ``"under"`` and M7
    ``"over"``."""
    marks = sorted((m.start(), side) for side, rx in _SIDES for m in rx.finditer(line))
    if not marks:
        return None
    for q in re.finditer(_token(queue), line):
        before = [side for pos, side in marks if pos < q.start()]
        return before[-1] if before else marks[0][1]
    return None


def retained(memory: str, rules: Sequence[Rule]) -> list[bool]:
    """For each rule: does one line of ``memory`` name its product, threshold and queue,
    with the queue on the rule's side of the threshold (:func:`side_of`)?"""
    lines = memory.splitlines()
    return [
        any(
            _has(ln, r.product)
            and _has(ln, str(r.threshold))
            and _has(ln, r.queue)
            and side_of(ln, r.queue) == r.side
            for ln in lines
        )
        for r in rules
    ]


# ---------------------------------------------------------------------------- engines
class Engine(Protocol):
    """What the benchmark needs from a model."""

    def scores(self, memory: str, ticket: str, candidates: Sequence[str]) -> list[float]:
        """Log-likelihood of each candidate answer after the routing prompt."""
        ...

    def chat(self, messages: Sequence[Mapping[str, str]], **options: Any) -> str:
        """A bounded reply (``max_tokens``; ``prefill`` starts the reply)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text``."""
        ...


def routing_messages(memory: str, ticket: str) -> list[dict[str, str]]:
    """The answering prompt (the notes come first, so they form a cacheable prefix)."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER.format(memory=memory or "(none)", ticket=ticket)},
    ]


class LocalEngine:
    """Candidate scoring and bounded generation with a transformers model.

    Each role (``"score"`` for answering, the memory roles for generation) has its own
    :class:`~lc_agents.backends.LocalBackend` sharing the weights, so each keeps its own
    prefix cache: a test ticket reuses the cached notes and costs a forward over its
    own tokens, then one batched forward for the codes' later tokens
    (:meth:`~lc_agents.backends.LocalBackend.score_continuations`). A generated reply
    can be started by a ``prefill`` string.
    """

    def __init__(self, model: Any = None, tokenizer: Any = None, dtype: Any = None) -> None:
        from lc_agents.backends import LocalBackend

        self._backends: dict[str, Any] = {}
        first = LocalBackend(model, tokenizer, dtype=dtype)
        self._backends["default"] = first
        self.model, self.tokenizer = first.model, first.tokenizer
        self.generated_tokens = 0

    def backend(self, role: str) -> Any:
        """The backend of ``role`` (created on first use, sharing the weights)."""
        from lc_agents.backends import LocalBackend

        if role not in self._backends:
            self._backends[role] = LocalBackend(self.model, self.tokenizer)
        return self._backends[role]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def chat(self, messages: Sequence[Mapping[str, str]], **options: Any) -> str:
        role = str(options.get("role", "default"))
        prefill = str(options.get("prefill", ""))
        backend = self.backend(role)
        ids = backend.prompt_ids(messages)
        if prefill:
            ids += self.tokenizer.encode(prefill, add_special_tokens=False)
        out = backend.generate_ids(ids, max_tokens=int(options.get("max_tokens", 64)))
        self.generated_tokens += len(out)
        return prefill + self.tokenizer.decode(out, skip_special_tokens=True)

    def prompt_ids(self, memory: str, ticket: str) -> list[int]:
        ids = self._backends["default"].prompt_ids(routing_messages(memory, ticket))
        return ids + self.tokenizer.encode(ASSISTANT_PREFIX, add_special_tokens=False)

    def scores(self, memory: str, ticket: str, candidates: Sequence[str]) -> list[float]:
        cands = [self.tokenizer.encode(" " + c, add_special_tokens=False) for c in candidates]
        return self.backend("score").score_continuations(self.prompt_ids(memory, ticket), cands)


# ---------------------------------------------------------------------------- memories
def _chat_fn(engine: Engine, role: str, max_tokens: int, prefill: str = "") -> Any:
    class _Role:
        def chat(self, messages: Sequence[Mapping[str, str]], **options: Any) -> str:
            return engine.chat(messages, role=role, max_tokens=max_tokens, prefill=prefill)

    return _Role()


CURATOR_PREFILL = '{"operations": [{"op": "'
CURATOR_ADD_PREFILL = '{"operations": [{"op": "ADD", "content": "'
REFLECTOR_PREFILL = '{"insights": ["'
PROMPTS = replace(
    DEFAULT_PROMPTS,
    reflector_system=(
        "You review an answer to a support ticket. Reply with one JSON object "
        '{{"insights": [<one short rule that decides tickets like this one, with its '
        "exact product code, amount and queue code>]}}."
    ),
)
PROMPTS_ADD = replace(
    PROMPTS,
    curator_system=(
        "You maintain a playbook of notes. Given lessons from a review, add what the "
        'playbook does not already state. Reply with one JSON object {{"operations": '
        '[{{"op": "ADD", "content": <new note>}}, ...]}} (an empty list when nothing is '
        "new). Sections in use: {sections}."
    ),
)
REWRITE_PREFILL = "- "
REWRITE_SYSTEM = (
    "You keep a short cheatsheet of routing rules learned from support tickets. Rewrite "
    "the whole cheatsheet so that it also holds what the latest ticket taught; keep "
    "exact product codes, amounts and queue codes. Reply with the cheatsheet only, one "
    "rule per line."
)


@dataclass
class Settings:
    """Knobs of one run (recorded in the summary)."""

    seed: int = 0
    n_products: int = 8
    n_train: int = 32
    n_test: int = 80
    early_share: float = 0.75
    reflector: str = "feedback"
    curator_tokens: int = 48
    reflector_tokens: int = 32
    rewrite_tokens: int = 40
    rewrite_long_tokens: int = 320
    dedup_threshold: float = 0.9
    retention_every: int = 4
    train_predict: bool = False
    dtype: str = "float32"


@dataclass
class MemoryState:
    """A learned memory during the stream: ACE's playbook or the rewrite cheatsheet."""

    condition: str
    store: PlaybookStore = field(default_factory=PlaybookStore)
    text: str = ""

    def render(self) -> str:
        if self.condition in PLAYBOOKS:
            return self.store.render(show_counters=False) if len(self.store) else ""
        return self.text

    def dump(self) -> str:
        return self.store.to_json() if self.condition in PLAYBOOKS else self.text

    def load(self, state: str) -> None:
        if self.condition in PLAYBOOKS:
            self.store = PlaybookStore()
            self.store.load_json(state)
        else:
            self.text = state


def update_ace(
    engine: Engine,
    mem: MemoryState,
    ticket: Ticket,
    prediction: str,
    feedback: str,
    rules: Sequence[Rule],
    settings: Settings,
    embedder: Any,
) -> dict[str, Any]:
    """One ACE step: reflection -> curator deltas -> apply -> de-duplicate."""
    if settings.reflector == "model":
        reflector = Reflector(
            _chat_fn(engine, "reflector", settings.reflector_tokens, REFLECTOR_PREFILL),
            prompts=PROMPTS,
        )
        attempt = Generation(ticket.text, prediction, [], f"Queue: {prediction}")
        reflection = reflector.reflect(
            attempt, feedback, ground_truth=ticket.answer, playbook=mem.store
        )
    else:  # the feedback's stated rule is the lesson
        verdict = "correct" if prediction == ticket.answer else "wrong queue"
        reflection = Reflection(
            diagnosis=(
                f"{verdict}: answered {prediction}, expected {ticket.answer}" if prediction else ""
            ),
            insights=[rules[ticket.rule].text()],
        )
    add_only = mem.condition == "ace_add"
    curator = Curator(
        _chat_fn(
            engine,
            "curator",
            settings.curator_tokens,
            CURATOR_ADD_PREFILL if add_only else CURATOR_PREFILL,
        ),
        default_section=SECTION,
        prompts=PROMPTS_ADD if add_only else PROMPTS,
    )
    curation = curator.curate(reflection, mem.store, item=ticket.id)
    if add_only:  # as in the reference implementation: only ADD operations are applied
        curation.rejected += [(d.to_dict(), "not an ADD") for d in curation.deltas if d.op != "ADD"]
        curation.deltas = [d for d in curation.deltas if d.op == "ADD"]
    report = mem.store.apply(curation.deltas, on_invalid="skip")
    merged = 0
    if settings.dedup_threshold < 1.0 and len(mem.store) > 1:
        merged = len(deduplicate(mem.store, embedder, threshold=settings.dedup_threshold))
    return {
        "insights": reflection.insights,
        "reflection_error": reflection.error,
        "curator_raw": curation.raw,
        "curation_error": curation.error,
        "deltas": [d.to_dict() for d in curation.deltas],
        "rejected": len(curation.rejected),
        "applied": sum(1 for r in report.results if r is not None),
        "merged": merged,
    }


def update_rewrite(
    engine: Engine,
    mem: MemoryState,
    ticket: Ticket,
    prediction: str,
    feedback: str,
    settings: Settings,
) -> dict[str, Any]:
    """One Dynamic-Cheatsheet-style step: the model rewrites the whole cheatsheet."""
    answered = f"Answer given: {prediction}\n" if prediction else ""
    user = (
        f"Current cheatsheet:\n{mem.text or '(empty)'}\n\nLatest ticket: {ticket.text}\n"
        f"{answered}Feedback: {feedback}"
    )
    reply = engine.chat(
        [{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": user}],
        role=mem.condition,
        max_tokens=(
            settings.rewrite_long_tokens
            if mem.condition == "rewrite_long"
            else settings.rewrite_tokens
        ),
        prefill=REWRITE_PREFILL,
    )
    text = reply.strip().removeprefix("```").removesuffix("```").strip()
    mem.text = text or mem.text
    return {"reply_chars": len(reply)}


# ---------------------------------------------------------------------------- records
class Records:
    """Append-only JSONL of training steps and test answers (locked appends)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[tuple[str, str, int, str], dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    try:
                        r = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by an interrupted write
                        continue
                    self.rows[self.key(r)] = r

    @staticmethod
    def key(r: Mapping[str, Any]) -> tuple[str, str, int, str]:
        return (str(r["phase"]), str(r["condition"]), int(r["seed"]), str(r["item"]))

    def __contains__(self, key: tuple[str, str, int, str]) -> bool:
        return key in self.rows

    def add(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            fcntl.flock(fh, fcntl.LOCK_UN)
        self.rows[self.key(row)] = row

    def select(self, phase: str, condition: str, seed: int) -> list[dict[str, Any]]:
        rows = [
            r for k, r in self.rows.items() if k[0] == phase and k[1] == condition and k[2] == seed
        ]
        return sorted(rows, key=lambda r: str(r["item"]))


def predict(
    engine: Engine, memory: str, ticket: Ticket, queues: Sequence[str]
) -> tuple[str, float]:
    """The most likely queue and its margin over the runner-up (nats)."""
    s = engine.scores(memory, ticket.text, queues)
    order = sorted(range(len(s)), key=lambda i: -s[i])
    return queues[order[0]], float(s[order[0]] - s[order[1]])


def oracle_memory(rules: Sequence[Rule]) -> str:
    """The true rules as playbook bullets."""
    store = PlaybookStore()
    from lc_agents.ace import Delta

    store.apply([Delta.add(SECTION, r.text()) for r in rules])
    return store.render(show_counters=False)


def train(
    engine: Engine,
    task: RoutingTask,
    condition: str,
    records: Records,
    settings: Settings,
    *,
    embedder: Any = None,
    deadline: float = math.inf,
) -> MemoryState:
    """Run (or resume) the training stream of a learned memory; returns the final memory."""
    mem = MemoryState(condition)
    done = records.select("train", condition, task.seed)
    if done:
        mem.load(done[-1]["state"])
    queues = task.queues
    for step, ticket in enumerate(task.train):
        key = ("train", condition, task.seed, ticket.id)
        if key in records:
            continue
        if time.time() > deadline:
            break
        t0 = time.perf_counter()
        gen0 = getattr(engine, "generated_tokens", 0)
        prediction = ""
        if settings.train_predict:
            prediction, _ = predict(engine, mem.render(), ticket, queues)
        t_pred = time.perf_counter() - t0
        feedback = ticket.feedback(prediction, task.rules)
        if condition in PLAYBOOKS:
            info = update_ace(
                engine, mem, ticket, prediction, feedback, task.rules, settings, embedder
            )
        else:
            info = update_rewrite(engine, mem, ticket, prediction, feedback, settings)
        text = mem.render()
        records.add(
            {
                "phase": "train",
                "condition": condition,
                "seed": task.seed,
                "item": ticket.id,
                "step": step + 1,
                "prediction": prediction,
                "correct": prediction == ticket.answer if prediction else None,
                "seconds": time.perf_counter() - t0,
                "predict_seconds": t_pred,
                "generated_tokens": getattr(engine, "generated_tokens", 0) - gen0,
                "memory": text,
                "memory_tokens": engine.count_tokens(text) if text else 0,
                "state": mem.dump(),
                **info,
            }
        )
    return mem


def evaluate(
    engine: Engine,
    task: RoutingTask,
    condition: str,
    memory: str,
    records: Records,
    *,
    deadline: float = math.inf,
) -> None:
    """Answer (or resume answering) the test tickets with ``memory`` as notes."""
    for ticket in task.test:
        key = ("test", condition, task.seed, ticket.id)
        if key in records:
            continue
        if time.time() > deadline:
            break
        t0 = time.perf_counter()
        prediction, margin = predict(engine, memory, ticket, task.queues)
        records.add(
            {
                "phase": "test",
                "condition": condition,
                "seed": task.seed,
                "item": ticket.id,
                "group": ticket.group,
                "prediction": prediction,
                "answer": ticket.answer,
                "correct": prediction == ticket.answer,
                "margin": round(margin, 4),
                "seconds": time.perf_counter() - t0,
            }
        )


def run(
    engine: Engine,
    task: RoutingTask,
    conditions: Iterable[str],
    records: Records,
    settings: Settings,
    *,
    embedder: Any = None,
    deadline: float = math.inf,
    log: Any = print,
) -> None:
    """Train the learned memories and answer the test tickets for ``conditions``."""
    for c in conditions:
        if c not in CONDITIONS:
            raise ValueError(f"unknown condition {c!r}; allowed: {list(CONDITIONS)}")
        t0 = time.time()
        if c in LEARNED:
            mem = train(engine, task, c, records, settings, embedder=embedder, deadline=deadline)
            if len(records.select("train", c, task.seed)) < len(task.train):
                log(f"{c}: training stopped by the time budget")
                continue
            memory = mem.render()
        else:
            memory = oracle_memory(task.rules) if c == "oracle" else ""
        evaluate(engine, task, c, memory, records, deadline=deadline)
        log(f"{c}: done in {time.time() - t0:.0f} s")


# ---------------------------------------------------------------------------- summary
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n``."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of ``wins`` against ``losses`` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_counts(a: Mapping[Any, bool], b: Mapping[Any, bool]) -> dict[str, Any]:
    """Outcomes ``a`` against ``b`` over the keys both have: how many, the keys only
    ``a`` got right, only ``b`` did, and the exact sign test."""
    both = sorted(set(a) & set(b), key=str)
    wins = sum(a[k] and not b[k] for k in both)
    losses = sum(b[k] and not a[k] for k in both)
    return {
        "n": len(both),
        "only_first_right": wins,
        "only_second_right": losses,
        "sign_test_p": round(sign_test(wins, losses), 4),
    }


def summarise(task: RoutingTask, records: Records, settings: Settings) -> dict[str, Any]:
    """Accuracy with Wilson intervals, retention curves and costs from the records."""
    seed = task.seed
    acc: dict[str, Any] = {}
    answered = {c: records.select("test", c, seed) for c in CONDITIONS}
    answered = {c: rows for c, rows in answered.items() if rows}
    # compare on the tickets every finished condition answered (all of them when every
    # condition finished); a condition still under way is scored on its share of those
    finished = [c for c, rows in answered.items() if len(rows) == len(task.test)]
    pool = [answered[c] for c in finished] or list(answered.values())
    common = set.intersection(*({r["item"] for r in rows} for rows in pool)) if pool else set()

    for c, all_rows in answered.items():
        rows = [r for r in all_rows if r["item"] in common]
        if not rows:
            continue
        entry: dict[str, Any] = {"answered": len(all_rows)}
        for name, sub in (
            ("all", rows),
            ("early", [r for r in rows if r["group"] == "early"]),
            ("late", [r for r in rows if r["group"] == "late"]),
        ):
            k = sum(bool(r["correct"]) for r in sub)
            lo, hi = wilson(k, len(sub))
            entry[name] = {
                "correct": k,
                "n": len(sub),
                "accuracy": k / len(sub) if sub else None,
                "wilson95": [round(lo, 4), round(hi, 4)],
            }
        entry["test_seconds"] = round(sum(r["seconds"] for r in rows), 1)
        entry["seconds_per_test_item"] = round(entry["test_seconds"] / len(rows), 3)
        acc[c] = entry
    paired = {}
    for a, b in (
        ("ace", "base"),
        ("ace", "rewrite"),
        ("ace_add", "ace"),
        ("ace_add", "rewrite"),
        ("ace_add", "rewrite_long"),
        ("ace_add", "base"),
        ("rewrite_long", "base"),
        ("oracle", "ace"),
        ("oracle", "ace_add"),
        ("rewrite", "base"),
    ):
        if a in answered and b in answered:
            ra = {r["item"]: bool(r["correct"]) for r in answered[a] if r["item"] in common}
            rb = {r["item"]: bool(r["correct"]) for r in answered[b] if r["item"] in common}
            paired[f"{a} vs {b}"] = paired_counts(ra, rb)
    first_seen: dict[int, int] = {}
    for i, t in enumerate(task.train):
        first_seen.setdefault(t.rule, i)
    early = [i for i, r in enumerate(task.rules) if r.group == "early"]
    learned: dict[str, Any] = {}
    for c in LEARNED:
        rows = sorted(records.select("train", c, seed), key=lambda r: int(r["step"]))
        if not rows:
            continue
        curve = []
        for r in rows:
            step = int(r["step"])
            if step % settings.retention_every and step != len(rows):
                continue
            keep = retained(r["memory"], task.rules)
            seen = [i for i in first_seen if first_seen[i] < step]
            seen_early = [i for i in early if i in seen]
            curve.append(
                {
                    "step": step,
                    "seen": len(seen),
                    "retained_seen": sum(keep[i] for i in seen) / len(seen) if seen else 0.0,
                    "retained_early": (
                        sum(keep[i] for i in seen_early) / len(seen_early) if seen_early else 0.0
                    ),
                    "retained_all": sum(keep) / len(keep),
                    "memory_tokens": r["memory_tokens"],
                }
            )
        secs = [r["seconds"] for r in rows]
        info: dict[str, Any] = {
            "steps": len(rows),
            "train_seconds": round(sum(secs), 1),
            "seconds_per_step": round(sum(secs) / len(secs), 2),
            "predict_seconds_per_step": round(
                sum(r["predict_seconds"] for r in rows) / len(rows), 2
            ),
            "generated_tokens_per_step": round(
                sum(r["generated_tokens"] for r in rows) / len(rows), 1
            ),
            "train_accuracy_first_half": _mean(r["correct"] for r in rows[: len(rows) // 2]),
            "train_accuracy_second_half": _mean(r["correct"] for r in rows[len(rows) // 2 :]),
            "final_memory_tokens": rows[-1]["memory_tokens"],
            "final_memory": rows[-1]["memory"],
            "retention": curve,
        }
        if c in PLAYBOOKS:
            info["curation_errors"] = sum(r["curation_error"] is not None for r in rows)
            info["steps_without_delta"] = sum(not r["deltas"] for r in rows)
            info["merged"] = sum(r["merged"] for r in rows)
            ops: dict[str, int] = {}
            for r in rows:
                for d in r["deltas"]:
                    ops[d["op"]] = ops.get(d["op"], 0) + 1
            info["ops"] = ops
        learned[c] = info
    return {
        "benchmark": "ACE on threshold routing (rules differing only in numbers and identifiers)",
        "model": f"Qwen2.5-Coder-0.5B-Instruct (embedded, {settings.dtype}, CPU)",
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "settings": asdict(settings),
        "rules": [r.text() for r in task.rules],
        "chance": 1 / len(task.rules),
        "common_test_items": len(common),
        "accuracy": acc,
        "paired": paired,
        "learned": learned,
    }


def _mean(values: Iterable[Any]) -> float | None:
    v = [float(bool(x)) for x in values if x is not None]
    return round(sum(v) / len(v), 3) if v else None


def plot(summary: Mapping[str, Any], path: Path) -> None:
    """Accuracy bars with Wilson intervals and retention curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    acc = summary["accuracy"]
    names = [c for c in CONDITIONS if c in acc]
    for offset, part, color in ((-0.2, "early", "tab:blue"), (0.2, "late", "tab:orange")):
        ys = [acc[c][part]["accuracy"] or 0.0 for c in names]
        lo = [y - acc[c][part]["wilson95"][0] for c, y in zip(names, ys, strict=True)]
        hi = [acc[c][part]["wilson95"][1] - y for c, y in zip(names, ys, strict=True)]
        xs = [i + offset for i in range(len(names))]
        a1.bar(xs, ys, 0.4, yerr=[lo, hi], capsize=3, color=color, label=f"{part} rules")
    a1.axhline(summary["chance"], color="grey", ls=":", label="chance")
    a1.set_xticks(range(len(names)), names)
    a1.set_ylabel("test accuracy (95% Wilson)")
    a1.set_ylim(0, 1)
    a1.legend(fontsize=8)
    colors = {
        "ace": "tab:green",
        "ace_add": "tab:purple",
        "rewrite": "tab:red",
        "rewrite_long": "tab:brown",
    }
    for c, color in colors.items():
        if c not in summary["learned"]:
            continue
        curve = summary["learned"][c]["retention"]
        xs = [p["step"] for p in curve]
        seen = [p["retained_seen"] for p in curve]
        a2.plot(xs, seen, "-", color=color, label=f"{c}: rules taught so far")
        early = [p["retained_early"] for p in curve]
        a2.plot(xs, early, ":", color=color, label=f"{c}: early rules", lw=2)
    a2.axvline(summary["settings"]["n_train"] / 2, color="grey", ls=":", lw=1)
    a2.set_xlabel("memory updates")
    a2.set_ylabel("rules still stated exactly")
    a2.set_ylim(-0.02, 1.05)
    a2.legend(fontsize=7, loc="center right")
    fig.suptitle("ACE vs rewrite memory, Qwen2.5-Coder-0.5B-Instruct", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def pool_seeds(per_seed: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """One summary over several seeds' summaries: accuracies and paired counts summed
    over all their test tickets, retention curves averaged step by step, costs averaged.

    The result has the keys of one seed's summary (so :func:`plot` draws it) plus
    ``seeds`` and ``per_seed``.
    """
    seeds = sorted(per_seed)
    first = per_seed[seeds[0]]
    acc: dict[str, Any] = {}
    for c in CONDITIONS:
        entries = [per_seed[s]["accuracy"][c] for s in seeds if c in per_seed[s]["accuracy"]]
        if not entries:
            continue
        entry: dict[str, Any] = {"seeds": len(entries)}
        for part in ("all", "early", "late"):
            k = sum(e[part]["correct"] for e in entries)
            n = sum(e[part]["n"] for e in entries)
            lo, hi = wilson(k, n)
            per = [e[part]["accuracy"] for e in entries]
            entry[part] = {
                "correct": k,
                "n": n,
                "accuracy": k / n if n else None,
                "wilson95": [round(lo, 4), round(hi, 4)],
                "per_seed": per,
            }
        entry["seconds_per_test_item"] = round(
            sum(e["seconds_per_test_item"] for e in entries) / len(entries), 3
        )
        acc[c] = entry
    paired: dict[str, Any] = {}
    for name in first["paired"]:
        rows = [per_seed[s]["paired"][name] for s in seeds if name in per_seed[s]["paired"]]
        wins = sum(r["only_first_right"] for r in rows)
        losses = sum(r["only_second_right"] for r in rows)
        paired[name] = {
            "n": sum(r["n"] for r in rows),
            "only_first_right": wins,
            "only_second_right": losses,
            "sign_test_p": round(sign_test(wins, losses), 4),
            "seeds": len(rows),
        }
    learned: dict[str, Any] = {}
    for c in LEARNED:
        infos = [per_seed[s]["learned"][c] for s in seeds if c in per_seed[s]["learned"]]
        if not infos:
            continue
        steps = sorted(set.intersection(*({p["step"] for p in i["retention"]} for i in infos)))
        curve = []
        for step in steps:
            points = [next(p for p in i["retention"] if p["step"] == step) for i in infos]
            curve.append(
                {
                    key: round(sum(p[key] for p in points) / len(points), 4)
                    for key in ("retained_seen", "retained_early", "retained_all")
                }
                | {"step": step, "memory_tokens": [p["memory_tokens"] for p in points]}
            )
        learned[c] = {
            "seeds": len(infos),
            "seconds_per_step": round(sum(i["seconds_per_step"] for i in infos) / len(infos), 2),
            "generated_tokens_per_step": round(
                sum(i["generated_tokens_per_step"] for i in infos) / len(infos), 1
            ),
            "final_memory_tokens": [i["final_memory_tokens"] for i in infos],
            "retention": curve,
        }
        for key in ("curation_errors", "steps_without_delta", "merged"):
            if key in infos[0]:
                learned[c][key] = [i[key] for i in infos]
    return {
        **{k: first[k] for k in ("benchmark", "model", "machine", "chance")},
        "settings": {**first["settings"], "seed": None, "seeds": seeds},
        "seeds": seeds,
        "common_test_items": sum(per_seed[s]["common_test_items"] for s in seeds),
        "accuracy": acc,
        "paired": paired,
        "learned": learned,
        "per_seed": {str(s): per_seed[s] for s in seeds},
    }


def paired_with(
    records: Records, other: Records, other_name: str, seeds: Sequence[int]
) -> dict[str, Any]:
    """Each condition against the same condition of another run, ticket by ticket.

    For a condition answered in both runs, over the (seed, ticket) pairs both answered:
    the tickets only this run got right, only the other did, and the exact sign test.
    """
    out: dict[str, Any] = {}
    for c in CONDITIONS:
        mine = {
            (s, r["item"]): bool(r["correct"]) for s in seeds for r in records.select("test", c, s)
        }
        theirs = {
            (s, r["item"]): bool(r["correct"]) for s in seeds for r in other.select("test", c, s)
        }
        common = set(mine) & set(theirs)
        if not common:
            continue
        out[f"{c} vs {other_name}:{c}"] = paired_counts(mine, theirs) | {
            "accuracy": sum(mine[k] for k in common) / len(common),
            "other_accuracy": sum(theirs[k] for k in common) / len(common),
        }
    return out


def write_summary(
    tasks: Sequence[RoutingTask],
    records: Records,
    settings: Settings,
    out: Path,
    name: str = "ace_routing",
    other: tuple[str, Records] | None = None,
) -> dict[str, Any]:
    """Summarise every seed's records (pooled when there are several); JSON + PNG.

    ``other=(name, records)`` adds ``paired_with_other_run``: each condition against
    the same condition of that run on the same tickets (:func:`paired_with`)."""
    per_seed = {
        t.seed: summarise(t, records, replace(settings, seed=t.seed))
        for t in tasks
        if any(k[2] == t.seed for k in records.rows)
    }
    if not per_seed:
        return {"accuracy": {}}
    summary = pool_seeds(per_seed) if len(tasks) > 1 else per_seed[tasks[0].seed]
    if other is not None:
        summary["paired_with_other_run"] = paired_with(
            records, other[1], other[0], [t.seed for t in tasks]
        )
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1))
    if summary["accuracy"]:
        plot(summary, out / f"{name}.png")
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conditions", default=",".join(CONDITIONS))
    p.add_argument("--seeds", default="0", help="comma-separated task seeds, run in order")
    p.add_argument("--train", type=int, default=32)
    p.add_argument("--test", type=int, default=80)
    p.add_argument("--products", type=int, default=8)
    p.add_argument("--reflector", choices=("feedback", "model"), default="feedback")
    p.add_argument("--curator-tokens", type=int, default=48)
    p.add_argument("--rewrite-tokens", type=int, default=40)
    p.add_argument("--rewrite-long-tokens", type=int, default=320)
    p.add_argument("--train-predict", action="store_true", help="answer each training item first")
    p.add_argument("--early-share", type=float, default=0.75)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--time-budget", type=float, default=math.inf, help="seconds")
    p.add_argument("--dtype", default="float32", help="model weights: float32 or bfloat16")
    p.add_argument("--name", default="ace_routing", help="stem of the records, JSON and PNG")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--summarise", action="store_true", help="only rewrite JSON and PNG")
    p.add_argument(
        "--paired-with",
        metavar="NAME",
        help="another run's --name in --out: compare each condition with its own there, "
        "ticket by ticket",
    )
    args = p.parse_args()
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if not seeds or len(set(seeds)) != len(seeds):
        p.error(f"--seeds needs distinct integers, got {args.seeds!r}")
    settings = Settings(
        seed=seeds[0],
        n_products=args.products,
        n_train=args.train,
        n_test=args.test,
        reflector=args.reflector,
        curator_tokens=args.curator_tokens,
        rewrite_tokens=args.rewrite_tokens,
        rewrite_long_tokens=args.rewrite_long_tokens,
        early_share=args.early_share,
        train_predict=args.train_predict,
        dtype=args.dtype,
    )
    tasks = [
        make_routing_task(
            seed,
            n_products=args.products,
            n_train=args.train,
            n_test=args.test,
            early_share=args.early_share,
        )
        for seed in seeds
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    records = Records(args.out / f"{args.name}_records.jsonl")
    if not args.summarise:
        import torch

        torch.set_num_threads(args.threads)
        deadline = time.time() + args.time_budget
        engine = LocalEngine(dtype=args.dtype)
        conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
        embedder = None
        if set(conditions) & set(PLAYBOOKS):
            from lc_agents.retrieval import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        for task in tasks:
            run_settings = replace(settings, seed=task.seed)
            run(
                engine,
                task,
                conditions,
                records,
                run_settings,
                embedder=embedder,
                deadline=deadline,
            )
    other = None
    if args.paired_with:
        path = args.out / f"{args.paired_with}_records.jsonl"
        if not path.exists():
            p.error(f"--paired-with {args.paired_with}: no records at {path}")
        other = (args.paired_with, Records(path))
    summary = write_summary(tasks, records, settings, args.out, args.name, other=other)
    for c, e in summary["accuracy"].items():
        a = e["all"]
        print(f"{c:8s} {a['correct']}/{a['n']} = {a['accuracy']:.3f} {a['wilson95']}")


if __name__ == "__main__":
    main()

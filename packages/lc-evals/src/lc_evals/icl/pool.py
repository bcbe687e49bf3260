"""In-context example pools with planted label noise and structurally misaligned examples.

The task: route a short customer message to one of four topics (:data:`POOL_LABELS`:
``billing``, ``shipping``, ``account``, ``technical``). Messages come from per-topic
templates with slots, so a pool holds many near-duplicates of any query, which is what
similarity retrieval finds first. A pool mixes four kinds of example (``kind``):

- ``clean``: a declarative message with its true topic;
- ``noisy``: the same kind of message with a wrong topic label (rate ``noise_rate``);
- ``misaligned_format``: a yes/no *question* about the same topics, labelled ``yes`` or
  ``no``: other sentence structure, other label space;
- ``misaligned_labels``: a declarative message labelled with a sentiment (``positive``
  / ``negative``): same structure as the queries, other label space.

Misaligned examples make up ``misaligned_rate`` of the pool, half of each kind. Queries
are clean declarative messages that never occur verbatim in the pool. Context
construction methods (similarity top-k, ContextNav-style filtering) choose shots from
``pool.examples``; :func:`format_shots` writes the k-shot prompt.

Example:
    >>> pool = make_icl_pool(pool_size=120, seed=0)
    >>> sorted({e.kind for e in pool.examples})
    ['clean', 'misaligned_format', 'misaligned_labels', 'noisy']
    >>> q = make_pool_queries(pool, n=3, seed=0)
    >>> all(x.label in POOL_LABELS and x.kind == "clean" for x in q)
    True
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from lc_evals.tasks._common import ItemPrompt, Sizer, check_int, item_rng
from lc_evals.types import TaskItem

POOL_LABELS: tuple[str, ...] = ("billing", "shipping", "account", "technical")
"""Label space of the queries."""

FORMAT_LABELS: tuple[str, ...] = ("yes", "no")
SENTIMENT_LABELS: tuple[str, ...] = ("positive", "negative")
KINDS: tuple[str, ...] = ("clean", "noisy", "misaligned_format", "misaligned_labels")

INSTRUCTION = (
    "Classify the customer message into one of these topics: "
    + ", ".join(POOL_LABELS)
    + ". Answer with the topic only."
)

_SLOTS: dict[str, tuple[str, ...]] = {
    "times": ("twice", "three times", "two times"),
    "product": ("order", "subscription", "plan", "membership"),
    "when": ("this morning", "last week", "yesterday", "since Monday", "this month"),
    "doc": ("invoice", "receipt", "bill", "statement"),
    "amount": ("amount", "total", "tax", "price"),
    "parcel": ("package", "parcel", "delivery", "box"),
    "acct": ("account", "profile", "login", "user account"),
    "screen": ("settings", "checkout", "profile", "home"),
}

_STATEMENTS: dict[str, tuple[str, ...]] = {
    "billing": (
        "I was charged {times} for my {product} {when}.",
        "My {doc} shows the wrong {amount}.",
        "The payment for my {product} was taken {times} {when}.",
        "My card was billed {times} for the {product}.",
    ),
    "shipping": (
        "My {parcel} has not arrived {when}.",
        "The courier left my {parcel} at the wrong address {when}.",
        "The tracking number for my {parcel} does not work.",
        "My {parcel} arrived damaged {when}.",
    ),
    "account": (
        "I cannot log in to my {acct} {when}.",
        "I forgot the password for my {acct}.",
        "My {acct} was locked {when}.",
        "I want to change the email on my {acct}.",
    ),
    "technical": (
        "The app crashes when I open the {screen} page {when}.",
        "The {screen} page shows an error message {when}.",
        "The app freezes on the {screen} screen.",
        "The {screen} button does nothing when I tap it.",
    ),
}

_QUESTIONS: dict[str, tuple[str, ...]] = {
    "billing": (
        "Was I charged {times} for my {product} {when}?",
        "Does my {doc} show the wrong {amount}?",
    ),
    "shipping": (
        "Has my {parcel} arrived {when}?",
        "Did the courier leave my {parcel} at the wrong address {when}?",
    ),
    "account": (
        "Can I log in to my {acct} {when}?",
        "Was my {acct} locked {when}?",
    ),
    "technical": (
        "Does the app crash when I open the {screen} page {when}?",
        "Does the {screen} page show an error message {when}?",
    ),
}

_FEELINGS = {
    "positive": ("I am glad that", "Good news:"),
    "negative": ("I am upset that", "Sadly,"),
}


@dataclass(frozen=True)
class PoolExample:
    """One labelled message of a pool (or a query).

    Attributes:
        id: unique id (``"pool-<seed>-<i>"`` or ``"query-<seed>-<i>"``).
        text: the message.
        label: its label as written in the pool (wrong for ``noisy`` examples).
        kind: one of :data:`KINDS`.
        topic: the topic the message is really about.
        structure: ``"statement"`` or ``"question"``.
        label_space: ``"topic"``, ``"yes_no"`` or ``"sentiment"``.
    """

    id: str
    text: str
    label: str
    kind: str
    topic: str
    structure: str
    label_space: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IclPool:
    """An example pool and the facts needed to build prompts from it."""

    examples: tuple[PoolExample, ...]
    labels: tuple[str, ...] = POOL_LABELS
    instruction: str = INSTRUCTION
    seed: int = 0
    stats: dict[str, int] = field(default_factory=dict)


def _fill(rng: random.Random, template: str) -> str:
    values = {k: rng.choice(v) for k, v in _SLOTS.items()}
    return template.format(**values)


def _statement(rng: random.Random, topic: str) -> str:
    return _fill(rng, rng.choice(_STATEMENTS[topic]))


def _check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}")
    return float(value)


def make_icl_pool(
    pool_size: int = 200,
    *,
    noise_rate: float = 0.25,
    misaligned_rate: float = 0.2,
    seed: int = 0,
) -> IclPool:
    """A seeded pool of ``pool_size`` examples with planted noise and misalignment.

    Args:
        pool_size: number of examples (>= 8).
        noise_rate: share of examples that are ``noisy`` (wrong topic label), in [0, 1).
        misaligned_rate: share that are misaligned (half question/yes-no, half
            sentiment-labelled), in [0, 1); ``noise_rate + misaligned_rate < 1``.
        seed: explicit seed.

    Returns:
        An :class:`IclPool`; ``stats`` counts each kind. Counts are exact
        (``round(rate * pool_size)``), positions are shuffled.
    """
    check_int("pool_size", pool_size, 8)
    noise = _check_rate("noise_rate", noise_rate)
    mis = _check_rate("misaligned_rate", misaligned_rate)
    if noise + mis >= 1.0:
        raise ValueError(f"noise_rate + misaligned_rate must be < 1, got {noise + mis}")
    rng = random.Random(f"lc-evals:icl_pool:{seed}")
    n_noisy = round(noise * pool_size)
    n_mis = round(mis * pool_size)
    n_format = n_mis // 2 + n_mis % 2
    kinds = (
        ["noisy"] * n_noisy
        + ["misaligned_format"] * n_format
        + ["misaligned_labels"] * (n_mis - n_format)
    )
    kinds += ["clean"] * (pool_size - len(kinds))
    rng.shuffle(kinds)
    examples = []
    for i, kind in enumerate(kinds):
        topic = POOL_LABELS[i % len(POOL_LABELS)]
        if kind == "misaligned_format":
            text = _fill(rng, rng.choice(_QUESTIONS[topic]))
            label, structure, space = rng.choice(FORMAT_LABELS), "question", "yes_no"
        elif kind == "misaligned_labels":
            label = rng.choice(SENTIMENT_LABELS)
            lead = rng.choice(_FEELINGS[label])
            body = _statement(rng, topic)
            text = f"{lead} {body[0].lower()}{body[1:]}"
            structure, space = "statement", "sentiment"
        else:
            text = _statement(rng, topic)
            structure, space = "statement", "topic"
            label = topic
            if kind == "noisy":
                label = rng.choice([t for t in POOL_LABELS if t != topic])
        examples.append(PoolExample(f"pool-{seed}-{i}", text, label, kind, topic, structure, space))
    stats = {k: kinds.count(k) for k in KINDS}
    return IclPool(examples=tuple(examples), seed=seed, stats=stats)


def make_pool_queries(pool: IclPool, n: int, seed: int) -> list[PoolExample]:
    """``n`` clean declarative queries, none identical to a pool text; query ``i`` is
    independent of ``n``.

    Args:
        pool: the pool the queries must not duplicate.
        n: number of queries (>= 1).
        seed: explicit seed.
    """
    check_int("n", n, 1)
    texts = {e.text for e in pool.examples}
    out = []
    for i in range(n):
        rng = item_rng("icl_noisy_pool", seed, i)
        topic = rng.choice(POOL_LABELS)
        for _ in range(10_000):
            text = _statement(rng, topic)
            if text not in texts:
                break
        else:  # pragma: no cover - the template space is far larger than any pool
            raise RuntimeError("cannot draw a query outside the pool")
        out.append(
            PoolExample(f"query-{seed}-{i}", text, topic, "clean", topic, "statement", "topic")
        )
    return out


def format_example(text: str, label: str | None = None) -> str:
    """One shot (or the open query when ``label`` is ``None``).

    Examples:
        >>> format_example("My box arrived damaged.", "shipping")
        'Message: My box arrived damaged.\\nTopic: shipping'
    """
    head = f"Message: {text}\nTopic:"
    return head if label is None else f"{head} {label}"


def format_shots(shots: list[PoolExample] | list[tuple[str, str]], query: str) -> str:
    """The k-shot prompt body: every shot, then the open query.

    ``shots`` holds :class:`PoolExample` or ``(text, label)`` pairs.
    """
    parts = []
    for s in shots:
        text, label = (s.text, s.label) if isinstance(s, PoolExample) else s
        parts.append(format_example(text, label))
    parts.append(format_example(query))
    return "\n\n".join(parts)


def icl_noisy_pool(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    pool_size: int = 200,
    noise_rate: float = 0.25,
    misaligned_rate: float = 0.2,
) -> list[TaskItem]:
    """Registered task ``icl_noisy_pool``: one query per item, the pool as context.

    The context lists the pool's shots (in pool order) while they fit in ``length``
    (a ``length`` that the whole pool cannot fill to within 1% is refused);
    ``metadata["pool"]`` holds the whole pool as dicts (with ``kind``), so a context
    construction method can pick shots and rebuild the prompt with :func:`format_shots`.

    Examples:
        >>> item = icl_noisy_pool(1, 2000, seed=0, pool_size=40)[0]
        >>> item.answers[0] in POOL_LABELS and len(item.metadata["pool"]) == 40
        True
    """
    pool = make_icl_pool(
        pool_size, noise_rate=noise_rate, misaligned_rate=misaligned_rate, seed=seed
    )
    queries = make_pool_queries(pool, n, seed)
    sizer = Sizer.of(tokenizer, length)
    measure, unit = sizer.measure, sizer.unit
    shots: list[str] = []
    for e in pool.examples:
        candidate = "\n\n".join([*shots, format_example(e.text, e.label)])
        if measure(candidate) > length:
            break
        shots.append(format_example(e.text, e.label))
    context = "\n\n".join(shots)
    if len(shots) == len(pool.examples) and measure(context) < 0.99 * length:
        per_shot = max(1, measure(context) // max(1, len(shots)))
        raise ValueError(
            f"icl_noisy_pool: the whole pool (pool_size={pool_size}) is only "
            f"{measure(context)} {unit} long, short of the target length {length}; "
            f"raise pool_size to about {int(length / per_shot) + 1} or lower the length"
        )
    pool_dicts = [e.to_dict() for e in pool.examples]
    return [
        sizer.item(
            "icl_noisy_pool",
            seed,
            i,
            context=context,
            prompt=ItemPrompt(f"{INSTRUCTION}\n\n{format_example(q.text)}"),
            answers=(q.label,),
            measured=measure(context),
            query=q.text,
            labels=list(POOL_LABELS),
            pool=pool_dicts,
            shots_in_context=len(shots),
            pool_stats=dict(pool.stats),
        )
        for i, q in enumerate(queries)
    ]

"""Short-context preference pairs and their long-context twins.

SoLoPO needs, for each question, a *short* context holding the task-relevant
information, a preference pair sampled from the policy on that short context, and a
*long* twin of the context: the same short context padded with irrelevant text to a
controlled length, the relevant part kept intact and in order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PreferencePair:
    """One SoLoPO training example.

    Attributes:
        question: what is asked.
        short_context: context with the task-relevant information only.
        long_context: ``short_context`` padded with irrelevant text.
        chosen: preferred response.
        rejected: dispreferred response.
    """

    question: str
    short_context: str
    long_context: str
    chosen: str
    rejected: str

    def __post_init__(self) -> None:
        for name in ("question", "short_context", "chosen", "rejected"):
            if not getattr(self, name).strip():
                raise ValueError(f"PreferencePair.{name} must not be empty")
        if self.chosen == self.rejected:
            raise ValueError("PreferencePair: chosen and rejected responses are identical")
        if not _is_subsequence(self.short_context.split("\n\n"), self.long_context.split("\n\n")):
            raise ValueError(
                "PreferencePair.long_context does not contain the short context's paragraphs in order"
            )


def _is_subsequence(needles: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def pad_context(
    short_context: str,
    distractors: Sequence[str],
    target_length: int,
    length_of: Callable[[str], int] = len,
    seed: int = 0,
) -> str:
    """Insert irrelevant paragraphs around and between the short context's paragraphs.

    Args:
        short_context: paragraphs separated by blank lines; kept intact and in order.
        distractors: irrelevant paragraphs to draw from (cycled, shuffled by ``seed``).
        target_length: desired length in ``length_of`` units (characters by default;
            pass ``lambda s: len(tokenizer.encode(s))`` for tokens). The result is the
            longest padding not exceeding it.
        length_of: length measure.
        seed: placement and order of the distractors.

    Returns:
        The long context.
    """
    if not distractors or not any(d.strip() for d in distractors):
        raise ValueError("distractors must hold at least one non-empty paragraph")
    relevant = [p for p in short_context.split("\n\n") if p.strip()]
    if length_of(short_context) > target_length:
        raise ValueError(
            f"the short context alone is {length_of(short_context)} long, more than target_length={target_length}"
        )
    rng = random.Random(seed)
    pool = [d.strip() for d in distractors if d.strip()]
    rng.shuffle(pool)
    # slots between relevant paragraphs (before, between, after); fill round-robin at random
    slots: list[list[str]] = [[] for _ in range(len(relevant) + 1)]

    def render() -> str:
        parts: list[str] = []
        for i, slot in enumerate(slots):
            parts.extend(slot)
            if i < len(relevant):
                parts.append(relevant[i])
        return "\n\n".join(parts)

    i = 0
    while True:
        slot = slots[rng.randrange(len(slots))]
        slot.append(pool[i % len(pool)])
        if length_of(render()) > target_length:
            slot.pop()
            return render()
        i += 1


def build_pairs(
    items: Sequence[tuple[str, str, Sequence[str]]],
    sample: Callable[[str, str, int], Sequence[str]],
    is_correct: Callable[[str, Sequence[str]], bool],
    distractors: Sequence[str],
    long_length: int,
    num_samples: int = 4,
    length_of: Callable[[str], int] = len,
    seed: int = 0,
) -> list[PreferencePair]:
    """Sample the policy on short contexts and keep (correct, wrong) pairs.

    Args:
        items: ``(short_context, question, answers)`` triples, e.g. from lc-evals tasks.
        sample: ``sample(context, question, n) -> n responses`` of the policy.
        is_correct: scorer ``(response, answers) -> bool``.
        distractors: irrelevant paragraphs used to build the long twins.
        long_length: length of the long contexts (``length_of`` units).
        num_samples: responses sampled per item.
        length_of: length measure (characters or tokens).
        seed: padding seed.

    Returns:
        One pair per item whose samples contain both a correct and a wrong response
        (items where every sample agrees carry no preference and are skipped).
    """
    pairs = []
    for index, (context, question, answers) in enumerate(items):
        responses = list(sample(context, question, num_samples))
        good = [r for r in responses if is_correct(r, answers)]
        bad = [r for r in responses if not is_correct(r, answers) and r.strip()]
        if not good or not bad:
            continue
        long_context = pad_context(context, distractors, long_length, length_of, seed + index)
        pairs.append(PreferencePair(question, context, long_context, good[0], bad[0]))
    return pairs


PROMPT_TEMPLATE = "{context}\n\n{question}"
"""How a context and a question become the user prompt (as in lc-evals' harness)."""


def pair_records(
    pairs: Sequence[PreferencePair], template: str = PROMPT_TEMPLATE, chat: bool = True
) -> list[dict[str, object]]:
    """Rows for :class:`~lc_train.preference.trainer.SoLoPOTrainer` (``datasets.Dataset.from_list``).

    Args:
        pairs: preference pairs with their long twins.
        template: user prompt with ``{context}`` and ``{question}`` fields.
        chat: chat-message rows (``[{"role": "user", ...}]`` prompts, assistant
            responses), else plain strings with prompts ending in a newline.

    Returns:
        Dicts with ``prompt``, ``long_prompt``, ``chosen`` and ``rejected``.

    Example:
        >>> pair = PreferencePair("Code?", "The code is 7.", "Noise.\\n\\nThe code is 7.", "7", "3")
        >>> rows = pair_records([pair], chat=False)
        >>> rows[0].get("long_prompt")
        'Noise.\\n\\nThe code is 7.\\n\\nCode?\\n'
    """
    rows: list[dict[str, object]] = []
    for p in pairs:
        short = template.format(context=p.short_context, question=p.question)
        long = template.format(context=p.long_context, question=p.question)
        if chat:
            rows.append(
                {
                    "prompt": [{"role": "user", "content": short}],
                    "long_prompt": [{"role": "user", "content": long}],
                    "chosen": [{"role": "assistant", "content": p.chosen}],
                    "rejected": [{"role": "assistant", "content": p.rejected}],
                }
            )
        else:
            rows.append(
                {
                    "prompt": short + "\n",
                    "long_prompt": long + "\n",
                    "chosen": p.chosen,
                    "rejected": p.rejected,
                }
            )
    return rows

"""Scorers: ``scorer(prediction, answers) -> float`` in ``[0, 1]``.

- :func:`exact_match`: the extracted answer equals one of ``answers`` after
  normalization (lower case, punctuation and articles dropped, spaces collapsed).
- :func:`contains_all`: the fraction of ``answers`` found in the prediction as whole
  words (RULER's ``string_match_all``).
- :func:`contains_any`: 1 if any answer is found as a whole word (RULER's
  ``string_match_part``).
- :func:`token_f1`: SQuAD-style token F1, best over ``answers``.
- :func:`rouge_l`: ROUGE-L F-measure (longest common subsequence of tokens), best over
  ``answers``.

:func:`extract_answer` pulls the final answer out of a reply: the last ``\\boxed{...}``,
else the text after the last "the answer is", else the reply itself.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

Scorer = Callable[[str, Sequence[str]], float]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER_IS = re.compile(r"the\s+(?:final\s+)?answer\s+is\s*[:\-]?\s*", re.IGNORECASE)


def normalize(text: str) -> str:
    """Lower case, strip punctuation and English articles, collapse whitespace.

    Examples:
        >>> normalize("The  Answer: Kitchen!")
        'answer kitchen'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in string.punctuation)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def extract_answer(text: str) -> str:
    r"""The final answer in a model reply.

    Examples:
        >>> extract_answer("so \\boxed{\\frac{1}{2}}")
        '\\frac{1}{2}'
        >>> extract_answer("I think the answer is: 42.")
        '42'
    """
    boxed = _boxed(text)
    if boxed is not None:
        return boxed.strip()
    matches = list(_ANSWER_IS.finditer(text))
    if matches:
        rest = text[matches[-1].end() :].strip()
        first_line = rest.splitlines()[0] if rest else ""
        return first_line.strip().rstrip(".").strip()
    return text.strip()


def _check(answers: Sequence[str]) -> None:
    if isinstance(answers, str) or not answers:
        raise ValueError(f"answers must be a non-empty sequence of strings, got {answers!r}")


def _found(answer: str, prediction: str) -> bool:
    pattern = rf"(?<!\w){re.escape(answer.strip().lower())}(?!\w)"
    return re.search(pattern, prediction.lower()) is not None


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the extracted, normalized prediction equals a normalized answer."""
    _check(answers)
    pred = normalize(extract_answer(prediction))
    return float(any(pred == normalize(a) for a in answers))


def contains_all(prediction: str, answers: Sequence[str]) -> float:
    """Fraction of ``answers`` present in ``prediction`` as whole words (case-insensitive).

    Examples:
        >>> contains_all("values: 1234567 and 7654321", ["1234567", "7654321", "1111111"])
        0.6666666666666666
    """
    _check(answers)
    return sum(_found(a, prediction) for a in answers) / len(answers)


def contains_any(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if any answer is present in ``prediction`` as a whole word (case-insensitive)."""
    _check(answers)
    return float(any(_found(a, prediction) for a in answers))


def _tokens(text: str) -> list[str]:
    return normalize(text).split()


def _best_f1(
    prediction: str, answers: Sequence[str], overlap: Callable[[list[str], list[str]], int]
) -> float:
    """The best F1 over ``answers`` of ``overlap`` between normalized token lists."""
    _check(answers)
    pred = _tokens(prediction)
    best = 0.0
    for a in answers:
        ref = _tokens(a)
        if not pred or not ref:
            best = max(best, float(pred == ref))
            continue
        shared = overlap(pred, ref)
        if shared:
            p, r = shared / len(pred), shared / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best


def _common(a: list[str], b: list[str]) -> int:
    return sum((Counter(a) & Counter(b)).values())


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1 between the prediction and the best-matching answer.

    Examples:
        >>> round(token_f1("the cat sat", ["a cat sat down"]), 3)
        0.8
    """
    return _best_f1(prediction, answers, _common)


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, answers: Sequence[str]) -> float:
    """ROUGE-L F1 (LCS over normalized tokens), best over ``answers``.

    Examples:
        >>> round(rouge_l("police killed the gunman", ["police kill the gunman"]), 3)
        0.667
    """
    return _best_f1(prediction, answers, _lcs)


SCORERS: dict[str, Scorer] = {
    "exact_match": exact_match,
    "contains_all": contains_all,
    "contains_any": contains_any,
    "token_f1": token_f1,
    "rouge_l": rouge_l,
}


def get_scorer(name: str) -> Scorer:
    """The scorer called ``name``; ``ValueError`` listing valid names if unknown."""
    try:
        return SCORERS[name]
    except KeyError:
        raise ValueError(
            f"unknown scorer {name!r}; valid scorers: {', '.join(sorted(SCORERS))}"
        ) from None


def default_scorer_name(task: str) -> str:
    """The default scorer of a registered ``task`` (``ValueError`` if unknown)."""
    from lc_evals.registry import available_tasks, task_spec

    if task not in available_tasks():
        raise ValueError(
            f"task {task!r} is not registered, so it has no default scorer; pass scorer=... "
            "or set metadata['scorer'] on its items"
        )
    return task_spec(task).scorer


def score(item: object, prediction: str, scorer: str | Scorer | None = None) -> float:
    """Score ``prediction`` for a :class:`~lc_evals.types.TaskItem` with its task's
    default scorer (or ``item.metadata["scorer"]``, or the given one).

    Examples:
        >>> from lc_evals import TaskItem
        >>> score(TaskItem("x-0-0", "niah_single", "...", "?", ("1234567",)), "It is 1234567.")
        1.0
    """
    answers = item.answers  # type: ignore[attr-defined]
    if scorer is None:
        scorer = item.metadata.get("scorer") or default_scorer_name(item.task)  # type: ignore[attr-defined]
    fn = get_scorer(scorer) if isinstance(scorer, str) else scorer
    return float(fn(prediction, answers))

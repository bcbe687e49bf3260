"""Tolerant parsing of model replies: JSON objects inside prose, code fences, ids, answers.

Models wrap JSON in code fences, add prose around it, use single quotes or leave a
trailing comma. :func:`extract_json` finds the first JSON object or array that parses
after a few conservative repairs and raises :class:`CuratorOutputError` (with the start
of the reply) when none does.

Examples:
    >>> extract_json('Sure! ```json\\n{"operations": [],}\\n```')
    {'operations': []}
    >>> extract_answer("Reasoning: 2+2.\\nFinal answer: 4")
    '4'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from lc_agents.ace.errors import CuratorOutputError
from lc_agents.ace.store import bullet_id_pattern

__all__ = ["cited_ids", "extract_answer", "extract_json"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _candidates(text: str) -> Iterable[str]:
    for m in _FENCE.finditer(text):
        yield m.group(1)
    # Balanced {...} / [...] spans, scanning from each opening bracket.
    for start, ch in enumerate(text):
        if ch not in "{[":
            continue
        close = "}" if ch == "{" else "]"
        depth, in_str, esc = 0, False, False
        for end in range(start, len(text)):
            c = text[end]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c == ch:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    yield text[start : end + 1]
                    break


def _loads(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    repaired = _TRAILING_COMMA.sub(r"\1", candidate.strip())
    try:
        return json.loads(repaired)
    except json.JSONDecodeError:
        pass
    if '"' not in repaired:  # single-quoted JSON
        return json.loads(repaired.replace("'", '"'))
    raise json.JSONDecodeError("unparseable", candidate, 0)


def extract_json(text: str, *, expect: type = dict) -> Any:
    """The first JSON value of type ``expect`` (dict or list) found in ``text``.

    Raises:
        CuratorOutputError: no such value parses.
    """
    if not isinstance(text, str):
        raise CuratorOutputError(f"expected the model's reply as text, got {type(text).__name__}")
    for candidate in _candidates(text):
        try:
            value = _loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, expect):
            return value
    head = text.strip().replace("\n", " ")[:160]
    raise CuratorOutputError(f"no JSON {expect.__name__} found in the model's reply: {head!r}")


def cited_ids(text: str, known: Iterable[str] | None = None) -> list[str]:
    """Bullet ids cited in ``text`` in order of first mention (only ``known`` ones if given)."""
    allowed = set(known) if known is not None else None
    out: list[str] = []
    for m in bullet_id_pattern.finditer(text):
        i = m.group(0)
        if i not in out and (allowed is None or i in allowed):
            out.append(i)
    return out


_ANSWER = re.compile(r"(?im)^\s*(?:\**\s*)?(?:final\s+answer|answer)\s*(?:\**)?\s*[:=]\s*(.+?)\s*$")


def extract_answer(text: str) -> str:
    """The text after the last ``Final answer:`` (or ``Answer:``) line, else the last line."""
    matches = _ANSWER.findall(text)
    if matches:
        return matches[-1].strip().strip("*").strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""

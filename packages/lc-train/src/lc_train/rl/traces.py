"""Synthetic MemAgent traces with ORACLE memories, for a supervised warm start.

For an lc-evals item (NIAH family or variable tracking) the oracle memory after chunk
``k`` is the list of *relevant facts* (the needle sentences that answer the question)
whose full text lies in chunks ``1..k``, one per line. The oracle memory update for a
chunk that adds no fact is the agent's keep word (``"none"``), which MemAgent treats as
"keep the memory unchanged"; the oracle answer is the item's answers joined by ", ".

The traces are produced by running lc-agents' MemAgent itself with a backend that
replies with the oracle text (:class:`OracleBackend`), so every prompt is exactly the
one the agent builds at inference time.

Example:
    >>> import lc_evals
    >>> from lc_agents.memagent import MemAgentConfig
    >>> item = lc_evals.generate("niah_single", n=1, length=2048, seed=0, tokenizer=tok)[0]  # doctest: +SKIP
    >>> turns = oracle_turns(item, tok, MemAgentConfig.plain(chunk_tokens=512))  # doctest: +SKIP
    >>> [t.kind for t in turns]  # doctest: +SKIP
    ['update', 'update', 'update', 'update', 'answer']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lc_train.rl.memagent import RecordingBackend, Turn, run_episode

if TYPE_CHECKING:
    from lc_agents.memagent import MemAgentConfig

__all__ = ["OracleBackend", "oracle_replies", "oracle_turns", "relevant_facts"]

_NIAH_KEY = re.compile(r" for (.+?) is: ")


def relevant_facts(item: Any) -> list[str]:
    """The sentences of ``item.context`` that the question needs, in document order.

    NIAH tasks: the needles whose key is asked (``metadata["keys"]``). Variable tracking:
    the assignments of the queried chain (``metadata["chains"][0]``). Other tasks with
    ``metadata["needles"]``: the needles that contain one of the answers.

    Raises:
        ValueError: the item has no needle metadata.
    """
    meta = item.metadata
    needles = meta.get("needles")
    if not needles:
        raise ValueError(f"item {item.id!r} has no metadata['needles']: no oracle memory")
    if item.task == "variable_tracking":
        chain = set(meta["chains"][0])
        facts = [n for n in needles if n.split()[1] in chain]
    elif "keys" in meta:
        keys = set(meta["keys"])
        facts = []
        for n in needles:
            m = _NIAH_KEY.search(n)
            if m is not None and m.group(1) in keys:
                facts.append(n)
    else:
        facts = [n for n in needles if any(a in n for a in item.answers)]
    offsets = meta.get("needle_offsets")
    if offsets is not None and len(offsets) == len(needles):
        where = {n: o for n, o in zip(needles, offsets)}
        facts.sort(key=lambda n: where[n])
    return facts


def oracle_replies(
    item: Any, tokenizer: Any, config: MemAgentConfig
) -> tuple[list[str], str] | None:
    """Oracle memory-update replies (one per chunk) and the oracle answer.

    Chunks are made exactly as MemAgent makes them (token-exact, ``config.chunk_tokens``).

    Returns:
        ``(updates, answer)``, or ``None`` when a relevant fact is split across two chunks
        (no chunk shows it whole, so no faithful oracle memory exists).
    """
    from lc_agents.memagent import split_tokens

    facts = relevant_facts(item)
    ids = tokenizer.encode(item.context, add_special_tokens=False)
    chunks = [tokenizer.decode(c) for c in split_tokens(ids, config.chunk_tokens)]
    seen: list[str] = []
    updates: list[str] = []
    found: set[str] = set()
    for text in chunks:
        new = [f for f in facts if f not in found and f in text]
        found.update(new)
        if new:
            seen.extend(new)
            updates.append("\n".join(seen))
        else:
            updates.append(config.keep_word)
    if found != set(facts):
        return None
    return updates, ", ".join(item.answers)


class OracleBackend(RecordingBackend):
    """Replies with given texts in order (memory updates, then the answer) and records them.

    Args:
        tokenizer: the agent's tokenizer.
        replies: the reply texts, in call order.
        end_ids: end tokens appended to each reply (default: the tokenizer's EOS).
    """

    def __init__(
        self, tokenizer: Any, replies: Sequence[str], end_ids: Sequence[int] | None = None
    ) -> None:
        super().__init__(tokenizer, end_ids)
        self._replies = list(replies)
        self._next = 0

    def reply(self, prompt: list[int], max_tokens: int) -> tuple[list[int], list[float] | None]:
        if self._next >= len(self._replies):
            raise RuntimeError("the agent asked for more replies than the oracle holds")
        text = self._replies[self._next]
        self._next += 1
        ids = [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]
        if len(ids) > max_tokens:
            raise ValueError(
                f"oracle reply of {len(ids)} tokens exceeds the agent's budget of "
                f"{max_tokens}; raise MemAgentConfig.memory_tokens / answer_tokens"
            )
        return [*ids, self.end_ids[0]], None


def oracle_turns(item: Any, tokenizer: Any, config: MemAgentConfig) -> list[Turn] | None:
    """The MemAgent turns of ``item`` with oracle replies (``None`` if a fact is split).

    Runs MemAgent with :class:`OracleBackend` and checks that the oracle's answer scores
    1 with the task's scorer (a self-check of the oracle).

    Returns:
        ``n_chunks`` update turns followed by one answer turn.
    """
    out = oracle_replies(item, tokenizer, config)
    if out is None:
        return None
    updates, answer = out
    backend = OracleBackend(tokenizer, [*updates, answer])
    episode = run_episode(backend, item, config)
    if episode.reward != 1.0:
        raise RuntimeError(
            f"oracle answer {episode.answer!r} scored {episode.reward} on item {item.id!r}"
        )
    return episode.turns

"""Fingerprints: short content hashes of items, systems, tokenizers and suites.

A result is only worth reusing if it was produced from the same item by the same
system under the same settings. These hashes name both sides: :func:`item_fingerprint`
covers everything a generator put into an item (task, context, question, answers and
the metadata, which holds the seed, the options and the tokenizer), and
:func:`run_fingerprint` covers the system's declared identity, the prompt template, the
generation options and the scorer.

A system declares its identity with an ``identity`` attribute or method returning
anything JSON-serializable (``OpenAIChatModel`` reports its URL, model name and
defaults); otherwise its import path (module and qualified name; for lambdas and
local functions also a hash of their code) stands in, and ``run(..., system_id=...)``
overrides both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from lc_evals.types import TaskItem

DIGEST_CHARS = 20


def canonical_json(obj: Any) -> str:
    """Key-sorted compact JSON; tuples and lists, int and string keys hash alike."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def digest(obj: Any) -> str:
    """The first 20 hex digits of the SHA-256 of :func:`canonical_json` of ``obj``.

    Examples:
        >>> digest({"b": 1, "a": (2, 3)}) == digest({"a": [2, 3], "b": 1})
        True
    """
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def item_fingerprint(item: TaskItem) -> str:
    """Hash of an item's task, context, question, answers and metadata (not its id)."""
    return digest(
        {
            "task": item.task,
            "context": item.context,
            "question": item.question,
            "answers": list(item.answers),
            "metadata": item.metadata,
        }
    )


def suite_fingerprint(items: Iterable[TaskItem]) -> str:
    """Hash of the ``(id, item fingerprint)`` pairs of a suite, in any order."""
    return digest(sorted((item.id, item_fingerprint(item)) for item in items))


def _import_path(obj: Any) -> str:
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", type(obj).__name__)
    code = getattr(target, "__code__", None)
    if "<" in qualname and code is not None:
        # lambdas and local functions share names: tell them apart by their code
        consts = [repr(c) for c in code.co_consts if not hasattr(c, "co_code")]
        qualname += "#" + digest([code.co_code.hex(), consts, list(code.co_names)])[:8]
    return f"{module}:{qualname}"


def declared_identity(obj: Any) -> Any:
    """What ``obj`` says it is: its ``identity`` (called if callable), else its import path.

    Examples:
        >>> def my_system(item):
        ...     return ""
        >>> declared_identity(my_system)
        'lc_evals.fingerprint:my_system'
    """
    ident = getattr(obj, "identity", None)
    if ident is not None and not isinstance(obj, type):
        value = ident() if callable(ident) else ident
        json.dumps(value, default=str)  # must be serializable
        return value
    func = getattr(obj, "func", None)  # functools.partial
    if func is not None and hasattr(obj, "args"):
        return {
            "partial": _import_path(func),
            "args": [repr(a) for a in obj.args],
            "kwargs": {k: repr(v) for k, v in getattr(obj, "keywords", {}).items()},
        }
    return _import_path(obj)


def tokenizer_identity(tokenizer: Any) -> Any:
    """A stable name for a tokenizer, recorded in every item it measured.

    ``tokenizers.Tokenizer`` (directly or wrapped as ``.inner``/``._tokenizer``) is
    named by a hash of its serialized vocabulary and rules; Hugging Face tokenizers by
    ``name_or_path`` and vocabulary size; anything else by its declared identity.
    """
    if tokenizer is None:
        return None
    for candidate in (
        tokenizer,
        getattr(tokenizer, "inner", None),
        getattr(tokenizer, "_tokenizer", None),
    ):
        to_str = getattr(candidate, "to_str", None)
        if callable(to_str):
            try:
                return {"tokenizers": digest(to_str())}
            except Exception:  # pragma: no cover - a to_str that is not the library's
                pass
    name = getattr(tokenizer, "name_or_path", None)
    if name:
        return {"name_or_path": str(name), "vocab_size": getattr(tokenizer, "vocab_size", None)}
    return declared_identity(tokenizer)


def run_fingerprint(
    system_identity: Any,
    *,
    template: str | None,
    chat_options: dict[str, Any],
    scorer: Any,
) -> str:
    """Hash of what turns an item into a scored result."""
    return digest(
        {
            "system": system_identity,
            "template": template,
            "chat_options": chat_options,
            "scorer": scorer,
        }
    )

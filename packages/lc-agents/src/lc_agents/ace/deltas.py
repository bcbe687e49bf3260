"""Delta operations on a playbook: ADD, UPDATE, MERGE and DELETE.

A delta is a small, local edit of the playbook. The curator emits a batch of them and
the store applies the batch in order inside one transaction, so the playbook is never
rewritten as a whole and a batch either lands completely or not at all.

Semantics (applied in order, each against the playbook left by the previous ones):

* ``ADD(section, content)`` creates a bullet with a fresh id and zero counters.
* ``UPDATE(id, content?, section?)`` replaces the content and/or moves the bullet; the
  counters and creation time are kept.
* ``MERGE(ids, content?)`` folds ``ids[1:]`` into the survivor ``ids[0]``: the counters
  are summed, the content becomes ``content`` (or stays the survivor's) and the other
  bullets are removed; the survivor's provenance records what it absorbed.
* ``DELETE(id)`` removes the bullet.

Shape errors (empty content, a merge of a bullet with itself, an unknown kind) are
raised when the :class:`Delta` is built; unknown ids are raised when it is applied.

Examples:
    >>> ops = [Delta.add("rules", "Quote prices in cents."), Delta.delete("rule-00007")]
    >>> [op.op for op in ops]
    ['ADD', 'DELETE']
    >>> Delta.from_dict({"op": "merge", "ids": ["a-00001", "a-00002"]}).ids
    ('a-00001', 'a-00002')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lc_agents.ace.errors import DeltaError

__all__ = ["OPS", "TAGS", "Delta", "OpKind", "Tag", "normalize_tag"]

OpKind = Literal["ADD", "UPDATE", "MERGE", "DELETE"]
OPS: tuple[str, ...] = ("ADD", "UPDATE", "MERGE", "DELETE")

Tag = Literal["helpful", "harmful", "neutral"]
TAGS: tuple[str, ...] = ("helpful", "harmful", "neutral")


def _clean(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise DeltaError(f"{what} must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise DeltaError(f"{what} must not be empty")
    return stripped


@dataclass(frozen=True)
class Delta:
    """One edit of the playbook. Prefer the constructors :meth:`add`, :meth:`update`,
    :meth:`merge` and :meth:`delete`.

    Attributes:
        op: ``"ADD"``, ``"UPDATE"``, ``"MERGE"`` or ``"DELETE"``.
        ids: the bullets the edit touches (none for ADD, one for UPDATE/DELETE, at least
            two distinct ones for MERGE; the first is the survivor).
        section: the section of an ADD, or the new section of an UPDATE (optional).
        content: the bullet text of an ADD/UPDATE, or the merged text of a MERGE
            (optional: then the survivor's text is kept).
        provenance: free-form metadata stored with the bullet (who proposed it, when).

    Raises:
        DeltaError: the operation is malformed.
    """

    op: OpKind
    ids: tuple[str, ...] = ()
    section: str | None = None
    content: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        op = str(self.op).upper() if isinstance(self.op, str) else self.op
        if op not in OPS:
            raise DeltaError(f"op is {self.op!r}; allowed: {list(OPS)}")
        object.__setattr__(self, "op", op)
        ids = tuple(self.ids)
        for i in ids:
            _clean(i, "bullet id")
        ids = tuple(i.strip() for i in ids)
        object.__setattr__(self, "ids", ids)
        if self.section is not None:
            object.__setattr__(self, "section", _clean(self.section, "section"))
        if self.content is not None:
            object.__setattr__(self, "content", _clean(self.content, "content"))
        object.__setattr__(self, "provenance", dict(self.provenance))
        if op == "ADD":
            if ids:
                raise DeltaError(f"ADD takes no ids, got {list(ids)}")
            if self.section is None:
                raise DeltaError("ADD needs a section")
            if self.content is None:
                raise DeltaError("ADD needs non-empty content")
        elif op == "UPDATE":
            if len(ids) != 1:
                raise DeltaError(f"UPDATE takes exactly one id, got {list(ids)}")
            if self.content is None and self.section is None:
                raise DeltaError("UPDATE needs new content or a new section")
        elif op == "MERGE":
            if len(ids) < 2:
                raise DeltaError(f"MERGE needs at least two ids, got {list(ids)}")
            if len(set(ids)) != len(ids):
                raise DeltaError(f"MERGE of a bullet with itself: ids {list(ids)} repeat an id")
            if self.section is not None:
                raise DeltaError("MERGE takes no section (the survivor keeps its own)")
        else:  # DELETE
            if len(ids) != 1:
                raise DeltaError(f"DELETE takes exactly one id, got {list(ids)}")
            if self.content is not None or self.section is not None:
                raise DeltaError("DELETE takes no content or section")

    @classmethod
    def add(cls, section: str, content: str, **provenance: Any) -> Delta:
        """A new bullet ``content`` in ``section``."""
        return cls("ADD", section=section, content=content, provenance=provenance)

    @classmethod
    def update(
        cls,
        bullet_id: str,
        content: str | None = None,
        *,
        section: str | None = None,
        **provenance: Any,
    ) -> Delta:
        """Replace the content (and/or the section) of ``bullet_id``."""
        return cls(
            "UPDATE", ids=(bullet_id,), section=section, content=content, provenance=provenance
        )

    @classmethod
    def merge(
        cls, bullet_ids: Sequence[str], content: str | None = None, **provenance: Any
    ) -> Delta:
        """Fold ``bullet_ids[1:]`` into ``bullet_ids[0]`` (counters summed)."""
        if isinstance(bullet_ids, str):
            raise DeltaError("MERGE takes a sequence of ids, not one string")
        return cls("MERGE", ids=tuple(bullet_ids), content=content, provenance=provenance)

    @classmethod
    def delete(cls, bullet_id: str, **provenance: Any) -> Delta:
        """Remove ``bullet_id``."""
        return cls("DELETE", ids=(bullet_id,), provenance=provenance)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :meth:`from_dict` reads it back."""
        out: dict[str, Any] = {"op": self.op}
        if self.ids:
            out["ids"] = list(self.ids)
        if self.section is not None:
            out["section"] = self.section
        if self.content is not None:
            out["content"] = self.content
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Delta:
        """Build a delta from a mapping as a curator writes it.

        Accepts ``op`` (or ``operation``/``type``, any case), ``id`` or ``ids``,
        ``section``, ``content`` (or ``text``) and ``provenance``.

        Raises:
            DeltaError: a field is missing or malformed.
        """
        if not isinstance(data, Mapping):
            raise DeltaError(f"a delta must be a mapping, got {type(data).__name__}")
        op = data.get("op", data.get("operation", data.get("type")))
        if not isinstance(op, str):
            raise DeltaError(f"delta has no op string: {dict(data)!r}")
        ids: Any = data.get("ids")
        if ids is None:
            one = data.get("id", data.get("bullet_id"))
            ids = () if one is None else (one,)
        if isinstance(ids, str):
            ids = (ids,)
        if not isinstance(ids, Sequence):
            raise DeltaError(f"ids must be a list of strings, got {ids!r}")
        provenance = data.get("provenance") or {}
        if not isinstance(provenance, Mapping):
            raise DeltaError(f"provenance must be a mapping, got {provenance!r}")
        return cls(
            op.upper(),  # type: ignore[arg-type]
            ids=tuple(ids),
            section=data.get("section"),
            content=data.get("content", data.get("text")),
            provenance=provenance,
        )


def normalize_tag(tag: Any) -> Tag:
    """Map a reflector's tag to ``"helpful"``, ``"harmful"`` or ``"neutral"``.

    Raises:
        DeltaError: the tag is none of them.
    """
    if isinstance(tag, str):
        t = tag.strip().lower()
        if t in TAGS:
            return t  # type: ignore[return-value]
    raise DeltaError(f"tag is {tag!r}; allowed: {list(TAGS)}")

"""Per-head role maps (retrieval vs sparse head) with a model fingerprint, saved as JSON.

A [RoleMap][lc_attention.lychee.roles.RoleMap] says, for each layer ``l`` and query head
``h``, whether the head is a *retrieval head* (attends to the whole KV cache during
decoding and publishes its top-k token positions) or a *sparse head* (attends only to
the positions last published at the same head index by an earlier layer). It carries a
fingerprint of the model it was learned on, so applying it to another model fails
loudly instead of silently.

Example:
    >>> rm = RoleMap.all_retrieval(num_layers=2, num_heads=3)
    >>> rm.num_retrieval, rm.num_heads_total
    (6, 6)
    >>> RoleMap.from_json(rm.to_json()) == rm
    True
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1
_STRUCTURAL = ("num_layers", "num_heads", "num_kv_heads", "head_dim")


def model_fingerprint(model_or_config: Any) -> dict[str, Any]:
    """Structural identity of a transformers model: type, name and attention geometry.

    Args:
        model_or_config: a ``PreTrainedModel`` or its ``PretrainedConfig``.

    Returns:
        ``{"model_type", "name", "num_layers", "num_heads", "num_kv_heads", "head_dim"}``
        (``name`` is the last path component of ``name_or_path``, possibly empty).

    Raises:
        ValueError: the config lacks the attention geometry.
    """
    cfg = getattr(model_or_config, "config", model_or_config)
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    try:
        layers = int(cfg.num_hidden_layers)
        heads = int(cfg.num_attention_heads)
    except AttributeError as exc:
        raise ValueError(f"config {type(cfg).__name__} lacks layer/head counts") from exc
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    name = str(getattr(cfg, "name_or_path", "") or getattr(cfg, "_name_or_path", "") or "")
    return {
        "model_type": str(getattr(cfg, "model_type", "")),
        "name": pathlib.PurePath(name).name if name else "",
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": kv,
        "head_dim": head_dim,
    }


@dataclass(frozen=True)
class RoleMap:
    """Retrieval/sparse role of every query head, ``retrieval[l][h] is True`` = retrieval.

    Args:
        retrieval: ``L`` rows of ``H`` booleans.
        fingerprint: [model_fingerprint][lc_attention.lychee.roles.model_fingerprint] of
            the model the roles belong to (may be empty for hand-made maps, which then
            only check the shape).
        meta: free-form provenance (training config, loss, ...); JSON-serializable.

    Raises:
        ValueError: ragged or empty rows, non-boolean entries, or a first layer with a
            sparse head (it has no earlier retrieval head to take positions from).
    """

    retrieval: tuple[tuple[bool, ...], ...]
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False)
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        rows = tuple(tuple(r) for r in self.retrieval)
        object.__setattr__(self, "retrieval", rows)
        if not rows or not rows[0]:
            raise ValueError("retrieval must have at least one layer with at least one head")
        width = len(rows[0])
        for i, r in enumerate(rows):
            if len(r) != width:
                raise ValueError(f"retrieval row {i} has {len(r)} heads, row 0 has {width}")
            if not all(isinstance(x, bool) for x in r):
                raise ValueError(f"retrieval row {i} must hold booleans, got {r}")
        if not all(rows[0]):
            raise ValueError(
                "retrieval[0] must be all True: heads of the first layer have no earlier "
                f"retrieval head to take token positions from, got {rows[0]}"
            )
        fp = self.fingerprint
        if fp and (fp.get("num_layers"), fp.get("num_heads")) != (len(rows), width):
            raise ValueError(
                f"fingerprint says {fp.get('num_layers')} layers x {fp.get('num_heads')} "
                f"heads but retrieval is {len(rows)} x {width}"
            )

    # ---- construction -------------------------------------------------------------
    @classmethod
    def all_retrieval(
        cls, num_layers: int, num_heads: int, fingerprint: dict[str, Any] | None = None
    ) -> RoleMap:
        """Every head a retrieval head (decoding is then exactly full attention)."""
        return cls(((True,) * num_heads,) * num_layers, dict(fingerprint or {}))

    @classmethod
    def from_model(
        cls, model: Any, retrieval: Sequence[Sequence[bool]] | None = None, **meta: Any
    ) -> RoleMap:
        """Role map for ``model`` (all retrieval when ``retrieval`` is None)."""
        fp = model_fingerprint(model)
        if retrieval is None:
            return cls.all_retrieval(fp["num_layers"], fp["num_heads"], fp)
        rows = tuple(tuple(bool(x) for x in r) for r in retrieval)
        return cls(rows, fp, dict(meta))

    # ---- views --------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """Layers ``L``."""
        return len(self.retrieval)

    @property
    def num_heads(self) -> int:
        """Query heads per layer ``H``."""
        return len(self.retrieval[0])

    @property
    def num_heads_total(self) -> int:
        """``L * H``."""
        return self.num_layers * self.num_heads

    @property
    def num_retrieval(self) -> int:
        """Number of retrieval heads."""
        return sum(sum(r) for r in self.retrieval)

    @property
    def retrieval_fraction(self) -> float:
        """Retrieval heads / all heads."""
        return self.num_retrieval / self.num_heads_total

    def layer(self, index: int) -> tuple[bool, ...]:
        """Roles of one layer's heads."""
        return self.retrieval[index]

    def _group_size(self, num_kv_heads: int | None) -> int:
        kv = num_kv_heads if num_kv_heads is not None else self.fingerprint.get("num_kv_heads")
        if kv is None:
            raise ValueError("num_kv_heads is needed (the fingerprint does not hold it)")
        if not (isinstance(kv, int) and kv >= 1 and self.num_heads % kv == 0):
            raise ValueError(
                f"num_kv_heads must be a positive divisor of the {self.num_heads} query heads, "
                f"got {kv!r}"
            )
        return self.num_heads // kv

    def kv_heads_read(self, num_kv_heads: int | None = None) -> int:
        """KV heads that some retrieval head reads in full during a decode step.

        Head ``h`` reads KV head ``h // (H / num_kv_heads)``; this count is what bounds
        the cost of the retrieval heads' full-cache attention.

        Args:
            num_kv_heads: KV heads per layer (default: the fingerprint's).

        Raises:
            ValueError: no ``num_kv_heads`` known, or one that does not divide ``H``.

        Example:
            >>> RoleMap(((True,) * 4, (True, False, False, False))).kv_heads_read(2)
            3
        """
        g = self._group_size(num_kv_heads)
        return sum(any(row[i : i + g]) for row in self.retrieval for i in range(0, len(row), g))

    def expand_to_kv_groups(self, num_kv_heads: int | None = None) -> RoleMap:
        """Every query head of a KV head that is read in full becomes a retrieval head.

        The KV heads read stay the same ([kv_heads_read][lc_attention.lychee.roles.RoleMap.kv_heads_read]
        is unchanged), so the cache traffic of the full attention is the same while fewer
        heads rely on carried token sets.

        Args:
            num_kv_heads: KV heads per layer (default: the fingerprint's).

        Returns:
            A new map with the same fingerprint; ``meta`` gains ``"expanded_to_kv_groups"``.

        Example:
            >>> rm = RoleMap(((True,) * 4, (True, False, False, False)))
            >>> rm.expand_to_kv_groups(2).retrieval[1]
            (True, True, False, False)
        """
        g = self._group_size(num_kv_heads)
        rows = tuple(
            tuple(any(row[(h // g) * g : (h // g + 1) * g]) for h in range(len(row)))
            for row in self.retrieval
        )
        return RoleMap(rows, dict(self.fingerprint), {**self.meta, "expanded_to_kv_groups": True})

    # ---- checks -------------------------------------------------------------------
    def check_model(self, model: Any, *, strict_name: bool = True) -> None:
        """Raise unless this map fits ``model``.

        Args:
            model: a transformers model (or config).
            strict_name: also require the same model name when both fingerprints have one.

        Raises:
            ValueError: naming every field that differs.
        """
        fp = model_fingerprint(model)
        expected: dict[str, Any] = {
            k: self.fingerprint[k] for k in ("model_type", *_STRUCTURAL) if k in self.fingerprint
        }
        expected.update(num_layers=self.num_layers, num_heads=self.num_heads)
        if strict_name and self.fingerprint.get("name") and fp["name"]:
            expected["name"] = self.fingerprint["name"]
        diffs = [f"{k}: map {v!r} vs model {fp[k]!r}" for k, v in expected.items() if fp[k] != v]
        if diffs:
            raise ValueError(
                "role map was learned for a different model (" + "; ".join(diffs) + ")"
            )

    # ---- serialization ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``retrieval`` as 0/1 rows)."""
        return {
            "format": "lc-lychee-role-map",
            "version": FORMAT_VERSION,
            "fingerprint": dict(self.fingerprint),
            "num_retrieval": self.num_retrieval,
            "retrieval": [[int(x) for x in r] for r in self.retrieval],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoleMap:
        """Inverse of [to_dict][lc_attention.lychee.roles.RoleMap.to_dict].

        Raises:
            ValueError: not a role-map dict, unknown version, or entries other than 0/1.
        """
        if data.get("format") != "lc-lychee-role-map":
            raise ValueError(f"not a LycheeDecode role map (format={data.get('format')!r})")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"role map version {data.get('version')!r} is not {FORMAT_VERSION}")
        rows = data["retrieval"]
        if any(x not in (0, 1) for r in rows for x in r):
            raise ValueError("role map entries must be 0 or 1")
        return cls(
            tuple(tuple(bool(x) for x in r) for r in rows),
            dict(data.get("fingerprint") or {}),
            dict(data.get("meta") or {}),
        )

    def to_json(self) -> str:
        """Serialize to a JSON string."""
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str) -> RoleMap:
        """Parse [to_json][lc_attention.lychee.roles.RoleMap.to_json]'s output."""
        return cls.from_dict(json.loads(text))

    def save(self, path: str | os.PathLike[str]) -> pathlib.Path:
        """Write the map as JSON to ``path`` (parents created); returns the path."""
        p = pathlib.Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_json())
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RoleMap:
        """Read a map written by [save][lc_attention.lychee.roles.RoleMap.save]."""
        return cls.from_json(pathlib.Path(path).read_text())

"""The playbook store: itemized bullets in SQLite, changed only by atomic delta batches.

The store is the whole state of an adaptation run: the bullets, their helpful/harmful
counters, an audit log of applied batches and the progress markers that let a run
resume. Every change runs inside one ``BEGIN IMMEDIATE`` transaction, so

* a batch of deltas, the counter updates from the reflector and the progress marker of
  the step either all land or none does (a crash mid-batch leaves no partial write);
* several threads or processes may curate the same file at once: writers queue on the
  database lock (WAL mode, readers never block) and counters are incremented in SQL,
  so no update is lost.

Bullet ids are ``<prefix>-<number>`` with a prefix taken from the section name and a
number from one counter per store (``rules-00003``), so they are stable and unique.

Examples:
    >>> from lc_agents.ace import Delta, PlaybookStore
    >>> store = PlaybookStore(":memory:")
    >>> report = store.apply([Delta.add("rules", "Quote prices in cents.")])
    >>> report.results
    ['rules-00001']
    >>> _ = store.apply(tags={"rules-00001": "helpful"})
    >>> store.get("rules-00001").helpful
    1
    >>> print(store.render())
    ## rules
    - [rules-00001] (+1/-0) Quote prices in cents.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from lc_agents.ace.deltas import Delta, normalize_tag
from lc_agents.ace.errors import DeltaError, UnknownBulletError

__all__ = ["ApplyReport", "Bullet", "PlaybookStore", "bullet_id_pattern"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bullets (
    id TEXT PRIMARY KEY,
    section TEXT NOT NULL,
    content TEXT NOT NULL,
    helpful INTEGER NOT NULL DEFAULT 0,
    harmful INTEGER NOT NULL DEFAULT 0,
    provenance TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS progress (
    run TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run, key)
);
CREATE TABLE IF NOT EXISTS history (
    rev INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, ops TEXT NOT NULL
);
"""

#: Regular expression matching bullet ids as the store writes them (``rules-00003``).
bullet_id_pattern = re.compile(r"\b[a-z][a-z0-9]{0,11}-\d{5,}\b")


def _prefix(section: str) -> str:
    letters = re.sub(r"[^a-z0-9]", "", section.lower())
    letters = letters.lstrip("0123456789")
    return letters[:12] or "b"


@dataclass(frozen=True)
class Bullet:
    """One playbook item.

    Attributes:
        id: stable id (``<prefix>-<number>``).
        section: the section it belongs to.
        content: the text shown to the generator.
        helpful: times the reflector tagged it helpful.
        harmful: times the reflector tagged it harmful.
        provenance: where it came from (role, run, step, merged ids ...).
        created_at: creation time (seconds since the epoch).
        updated_at: last change (seconds since the epoch).
        seq: creation order within the store.
    """

    id: str
    section: str
    content: str
    helpful: int = 0
    harmful: int = 0
    provenance: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    seq: int = 0

    @property
    def score(self) -> int:
        """Net usefulness, ``helpful - harmful`` (the rendering order)."""
        return self.helpful - self.harmful

    def line(self, show_counters: bool = True) -> str:
        """The bullet as one prompt line: ``- [id] (+h/-x) content``."""
        counters = f" (+{self.helpful}/-{self.harmful})" if show_counters else ""
        return f"- [{self.id}]{counters} {self.content}"


@dataclass
class ApplyReport:
    """What one :meth:`PlaybookStore.apply` call did.

    Attributes:
        results: per delta, the id it produced or touched (the new id of an ADD, the
            survivor of a MERGE), or ``None`` where the delta was rejected.
        rejected: ``(index, reason)`` of deltas skipped with ``on_invalid="skip"``.
        tagged: ids whose counters were updated.
        unknown_tags: tagged ids the playbook does not hold (ignored).
    """

    results: list[str | None] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    tagged: list[str] = field(default_factory=list)
    unknown_tags: list[str] = field(default_factory=list)


def _row_to_bullet(row: Sequence[Any]) -> Bullet:
    return Bullet(
        id=row[0],
        section=row[1],
        content=row[2],
        helpful=int(row[3]),
        harmful=int(row[4]),
        provenance=json.loads(row[5]),
        created_at=float(row[6]),
        updated_at=float(row[7]),
        seq=int(row[8]),
    )


_COLUMNS = "id, section, content, helpful, harmful, provenance, created_at, updated_at, seq"


class PlaybookStore:
    """A playbook persisted in SQLite (WAL mode), safe for concurrent curators.

    Args:
        path: database file (created if missing) or ``":memory:"`` for a private,
            in-process playbook.
        timeout: seconds a writer waits for the database lock before failing.
        clock: time source for the timestamps (seconds).

    Each thread gets its own connection; open the same path in several processes to
    share one playbook.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.path = str(path)
        self.timeout = timeout
        self.clock = clock
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        #: Called after each delta inside the transaction (used to test crash safety).
        self._after_op: Callable[[int], None] | None = None
        with self._lock:
            self._conn().executescript(_SCHEMA)

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared is None:
                self._shared = self._connect()
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock if self._memory else _nullcontext():
            conn = self._conn()
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Cursor]:
        with self._lock if self._memory else _nullcontext():
            yield self._conn().cursor()

    def close(self) -> None:
        """Close this thread's connection (the store reopens on next use)."""
        conn = self._shared if self._memory else getattr(self._local, "conn", None)
        if conn is not None and not self._memory:
            conn.close()
            self._local.conn = None

    # ------------------------------------------------------------------ reads
    def bullets(self, section: str | None = None) -> list[Bullet]:
        """All bullets in creation order (optionally of one section)."""
        with self._read() as cur:
            if section is None:
                rows = cur.execute(f"SELECT {_COLUMNS} FROM bullets ORDER BY seq").fetchall()
            else:
                rows = cur.execute(
                    f"SELECT {_COLUMNS} FROM bullets WHERE section = ? ORDER BY seq", (section,)
                ).fetchall()
        return [_row_to_bullet(r) for r in rows]

    def get(self, bullet_id: str) -> Bullet:
        """The bullet ``bullet_id``.

        Raises:
            UnknownBulletError: no such bullet.
        """
        with self._read() as cur:
            row = cur.execute(
                f"SELECT {_COLUMNS} FROM bullets WHERE id = ?", (bullet_id,)
            ).fetchone()
        if row is None:
            raise UnknownBulletError(f"unknown bullet id {bullet_id!r}")
        return _row_to_bullet(row)

    def __len__(self) -> int:
        with self._read() as cur:
            return int(cur.execute("SELECT COUNT(*) FROM bullets").fetchone()[0])

    def __contains__(self, bullet_id: object) -> bool:
        with self._read() as cur:
            return (
                cur.execute("SELECT 1 FROM bullets WHERE id = ?", (bullet_id,)).fetchone()
                is not None
            )

    def sections(self) -> list[str]:
        """Section names in order of their first bullet."""
        with self._read() as cur:
            rows = cur.execute(
                "SELECT section, MIN(seq) FROM bullets GROUP BY section ORDER BY 2"
            ).fetchall()
        return [r[0] for r in rows]

    def revision(self) -> int:
        """Number of batches applied so far (0 for a fresh store)."""
        with self._read() as cur:
            row = cur.execute("SELECT COALESCE(MAX(rev), 0) FROM history").fetchone()
        return int(row[0])

    def history(self) -> list[dict[str, Any]]:
        """The audit log: one entry ``{"rev", "at", "ops"}`` per applied batch."""
        with self._read() as cur:
            rows = cur.execute("SELECT rev, at, ops FROM history ORDER BY rev").fetchall()
        return [{"rev": r[0], "at": r[1], "ops": json.loads(r[2])} for r in rows]

    # ------------------------------------------------------------------ progress
    def get_progress(self, run: str) -> dict[str, Any]:
        """The progress markers of ``run`` (``{}`` for a run never started)."""
        with self._read() as cur:
            rows = cur.execute("SELECT key, value FROM progress WHERE run = ?", (run,)).fetchall()
        return {k: json.loads(v) for k, v in rows}

    def set_progress(self, run: str, values: Mapping[str, Any]) -> None:
        """Record progress markers of ``run`` atomically (see also ``apply(progress=)``)."""
        with self._transaction() as cur:
            self._write_progress(cur, run, values)

    @staticmethod
    def _write_progress(cur: sqlite3.Cursor, run: str, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            cur.execute(
                "INSERT INTO progress (run, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (run, key) DO UPDATE SET value = excluded.value",
                (run, str(key), json.dumps(value)),
            )

    # ------------------------------------------------------------------ writes
    def apply(
        self,
        deltas: Iterable[Delta] = (),
        *,
        tags: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        progress: tuple[str, Mapping[str, Any]] | None = None,
        on_invalid: Literal["raise", "skip"] = "raise",
    ) -> ApplyReport:
        """Apply counter tags, then ``deltas`` in order, in one transaction.

        Args:
            deltas: the batch; each is validated against the playbook as left by the
                previous ones.
            tags: reflector tags ``{id: "helpful" | "harmful" | "neutral"}`` (or pairs,
                which may repeat an id); each increments that counter by one. Ids the
                playbook does not hold are reported in ``unknown_tags``, not raised.
            progress: ``(run, markers)`` written in the same transaction.
            on_invalid: ``"raise"``: an invalid delta aborts the whole batch (nothing
                is written); ``"skip"``: it is left out and listed in ``rejected``.

        Returns:
            An :class:`ApplyReport`.

        Raises:
            UnknownBulletError: a delta names a missing id (with ``on_invalid="raise"``).
            DeltaError: a tag is not one of helpful/harmful/neutral.
        """
        if on_invalid not in ("raise", "skip"):
            raise ValueError(f"on_invalid is {on_invalid!r}; allowed: ['raise', 'skip']")
        ops = list(deltas)
        for i, op in enumerate(ops):
            if not isinstance(op, Delta):
                raise DeltaError(f"deltas[{i}] is a {type(op).__name__}, not a Delta")
        pairs: list[tuple[str, str]] = []
        if tags is not None:
            items = tags.items() if isinstance(tags, Mapping) else tags
            pairs = [(str(k), normalize_tag(v)) for k, v in items]
        with self._transaction() as cur:
            return self._apply_in(cur, ops, pairs, progress, on_invalid)

    def apply_planned(
        self,
        plan: Callable[[list[Bullet]], Sequence[Delta]],
        *,
        on_invalid: Literal["raise", "skip"] = "raise",
    ) -> tuple[list[Delta], ApplyReport]:
        """Read the playbook, plan deltas from it and apply them in one transaction.

        ``plan`` receives every bullet (creation order) as it stands once this call holds
        the write lock, and returns the deltas to apply. No other writer can change the
        playbook between the read and the write, so a plan never names a bullet another
        process has just merged or deleted. Keep ``plan`` short: other writers wait.

        Args:
            plan: ``bullets -> deltas`` (may return no deltas: nothing is written).
            on_invalid: as in :meth:`apply`.

        Returns:
            The deltas ``plan`` returned and the :class:`ApplyReport` of applying them.

        Examples:
            >>> from lc_agents.ace import Delta, PlaybookStore
            >>> s = PlaybookStore()
            >>> _ = s.apply([Delta.add("r", "a"), Delta.add("r", "a")])
            >>> ops, report = s.apply_planned(lambda bs: [Delta.merge([b.id for b in bs])])
            >>> report.results, len(s)
            (['r-00001'], 1)
        """
        if on_invalid not in ("raise", "skip"):
            raise ValueError(f"on_invalid is {on_invalid!r}; allowed: ['raise', 'skip']")
        with self._transaction() as cur:
            rows = cur.execute(f"SELECT {_COLUMNS} FROM bullets ORDER BY seq").fetchall()
            ops = list(plan([_row_to_bullet(r) for r in rows]))
            for i, op in enumerate(ops):
                if not isinstance(op, Delta):
                    raise DeltaError(f"plan returned a {type(op).__name__} at {i}, not a Delta")
            if not ops:
                return [], ApplyReport()
            return ops, self._apply_in(cur, ops, [], None, on_invalid)

    def _apply_in(
        self,
        cur: sqlite3.Cursor,
        ops: list[Delta],
        pairs: list[tuple[str, str]],
        progress: tuple[str, Mapping[str, Any]] | None,
        on_invalid: str,
    ) -> ApplyReport:
        """Apply tags, deltas and progress through ``cur`` (inside a transaction)."""
        report = ApplyReport()
        now = self.clock()
        for bullet_id, tag in pairs:
            if tag == "neutral":
                exists = cur.execute("SELECT 1 FROM bullets WHERE id = ?", (bullet_id,)).fetchone()
                (report.tagged if exists else report.unknown_tags).append(bullet_id)
                continue
            cur.execute(
                f"UPDATE bullets SET {tag} = {tag} + 1, updated_at = ? WHERE id = ?",
                (now, bullet_id),
            )
            (report.tagged if cur.rowcount else report.unknown_tags).append(bullet_id)
        applied: list[dict[str, Any]] = []
        for i, op in enumerate(ops):
            try:
                result = self._apply_one(cur, op, now)
            except UnknownBulletError as err:
                if on_invalid == "raise":
                    raise UnknownBulletError(f"deltas[{i}] ({op.op}): {err}") from None
                report.results.append(None)
                report.rejected.append((i, str(err)))
                continue
            report.results.append(result)
            applied.append({**op.to_dict(), "result": result})
            if self._after_op is not None:
                self._after_op(i)
        if applied or pairs:
            cur.execute(
                "INSERT INTO history (at, ops) VALUES (?, ?)",
                (now, json.dumps({"deltas": applied, "tags": pairs})),
            )
        if progress is not None:
            self._write_progress(cur, progress[0], progress[1])
        return report

    def _next_seq(self, cur: sqlite3.Cursor) -> int:
        row = cur.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
        seq = int(row[0]) if row else 1
        cur.execute(
            "INSERT INTO meta (key, value) VALUES ('next_seq', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(seq + 1),),
        )
        return seq

    @staticmethod
    def _fetch(cur: sqlite3.Cursor, bullet_id: str) -> Bullet:
        row = cur.execute(f"SELECT {_COLUMNS} FROM bullets WHERE id = ?", (bullet_id,)).fetchone()
        if row is None:
            raise UnknownBulletError(f"unknown bullet id {bullet_id!r}")
        return _row_to_bullet(row)

    def _apply_one(self, cur: sqlite3.Cursor, op: Delta, now: float) -> str:
        if op.op == "ADD":
            assert op.section is not None
            assert op.content is not None
            while True:  # skip numbers taken by imported bullets
                seq = self._next_seq(cur)
                new_id = f"{_prefix(op.section)}-{seq:05d}"
                if cur.execute("SELECT 1 FROM bullets WHERE id = ?", (new_id,)).fetchone() is None:
                    break
            cur.execute(
                f"INSERT INTO bullets ({_COLUMNS}) VALUES (?, ?, ?, 0, 0, ?, ?, ?, ?)",
                (new_id, op.section, op.content, json.dumps(dict(op.provenance)), now, now, seq),
            )
            return new_id
        if op.op == "UPDATE":
            old = self._fetch(cur, op.ids[0])
            prov = {**old.provenance, **op.provenance}
            cur.execute(
                "UPDATE bullets SET content = ?, section = ?, provenance = ?, updated_at = ? WHERE id = ?",
                (
                    op.content or old.content,
                    op.section or old.section,
                    json.dumps(prov),
                    now,
                    old.id,
                ),
            )
            return old.id
        if op.op == "MERGE":
            parts = [self._fetch(cur, i) for i in op.ids]
            survivor, others = parts[0], parts[1:]
            merged_from = list(survivor.provenance.get("merged_from", []))
            merged_from += [b.id for b in others]
            prov = {**survivor.provenance, **op.provenance, "merged_from": merged_from}
            cur.execute(
                "UPDATE bullets SET content = ?, helpful = ?, harmful = ?, provenance = ?, "
                "updated_at = ? WHERE id = ?",
                (
                    op.content or survivor.content,
                    sum(b.helpful for b in parts),
                    sum(b.harmful for b in parts),
                    json.dumps(prov),
                    now,
                    survivor.id,
                ),
            )
            cur.executemany("DELETE FROM bullets WHERE id = ?", [(b.id,) for b in others])
            return survivor.id
        # DELETE
        cur.execute("DELETE FROM bullets WHERE id = ?", (op.ids[0],))
        if cur.rowcount == 0:
            raise UnknownBulletError(f"unknown bullet id {op.ids[0]!r}")
        return op.ids[0]

    # ------------------------------------------------------------------ rendering / export
    def select(
        self,
        budget: int | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        show_counters: bool = True,
    ) -> list[Bullet]:
        """The bullets that fit ``budget``, most useful first.

        Bullets are ranked by ``helpful - harmful``, then ``helpful``, then age (older
        first), and taken greedily while their lines fit the budget (a bullet that does
        not fit is skipped, a shorter later one may still fit).

        Args:
            budget: tokens (with ``count_tokens``) or characters (without); ``None``
                for no limit.
            count_tokens: tokenizer length function, e.g. ``backend.count_tokens``.
            show_counters: whether the lines carry the counters (affects their length).
        """
        if budget is not None and budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        measure = count_tokens or len
        ranked = sorted(self.bullets(), key=lambda b: (-b.score, -b.helpful, b.seq))
        if budget is None:
            return ranked
        chosen, used = [], 0
        for b in ranked:
            cost = measure(b.line(show_counters)) + 1  # + the newline
            if used + cost <= budget:
                chosen.append(b)
                used += cost
        return chosen

    def render(
        self,
        budget: int | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        show_counters: bool = True,
        empty: str = "(the playbook is empty)",
    ) -> str:
        """The playbook as prompt text within ``budget`` (see :meth:`select`).

        Chosen bullets are grouped under ``## section`` headings (sections in order of
        their first bullet; bullets by usefulness inside a section). Headings are not
        counted against the budget.
        """
        chosen = self.select(budget, count_tokens=count_tokens, show_counters=show_counters)
        if not chosen:
            return empty
        order = {s: i for i, s in enumerate(self.sections())}
        groups: dict[str, list[Bullet]] = {}
        for b in chosen:
            groups.setdefault(b.section, []).append(b)
        lines: list[str] = []
        for section in sorted(groups, key=lambda s: order.get(s, len(order))):
            if lines:
                lines.append("")
            lines.append(f"## {section}")
            lines.extend(b.line(show_counters) for b in groups[section])
        return "\n".join(lines)

    def to_json(self) -> str:
        """Every bullet with all fields, as a JSON document ``{"bullets": [...],
        "next_seq": n}`` (``next_seq``: the number the next ADD's id will get)."""
        with self._read() as cur:
            row = cur.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
            rows = cur.execute(f"SELECT {_COLUMNS} FROM bullets ORDER BY seq").fetchall()
        bullets = [asdict(_row_to_bullet(r)) for r in rows]
        return json.dumps({"bullets": bullets, "next_seq": int(row[0]) if row else 1}, indent=2)

    def to_markdown(self) -> str:
        """A human-readable export: one ``##`` heading per section, counters included."""
        return self.render(None, show_counters=True, empty="")

    def load_json(self, text: str) -> int:
        """Import bullets exported by :meth:`to_json` (ids kept); returns how many.

        Every entry is checked before anything is written (field names and types, ids
        unique), so a malformed file leaves the playbook as it was. A ``next_seq`` in the
        document (as :meth:`to_json` writes it) carries the id counter over, so a store
        restored into an empty one gives later ADDs the ids the original would have.

        Raises:
            DeltaError: an id already exists here or an entry is malformed (the message
                names the entry and the field).
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DeltaError(f"the playbook JSON does not parse: {err}") from None
        rows = data.get("bullets") if isinstance(data, Mapping) else None
        if not isinstance(rows, list):
            raise DeltaError('expected a JSON object {"bullets": [...]}')
        bullets = [_bullet_from_json(i, row) for i, row in enumerate(rows)]
        next_seq = data.get("next_seq")
        if next_seq is not None and (
            isinstance(next_seq, bool) or not isinstance(next_seq, int) or next_seq < 1
        ):
            raise DeltaError(f"next_seq must be an integer >= 1, got {next_seq!r}")
        seen: set[str] = set()
        for i, b in enumerate(bullets):
            if b.id in seen:
                raise DeltaError(f"bullets[{i}].id {b.id!r} appears twice in the file")
            seen.add(b.id)
        with self._transaction() as cur:
            for b in bullets:
                if cur.execute("SELECT 1 FROM bullets WHERE id = ?", (b.id,)).fetchone():
                    raise DeltaError(f"bullet id {b.id!r} already exists")
                seq = self._next_seq(cur)
                cur.execute(
                    f"INSERT INTO bullets ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        b.id,
                        b.section,
                        b.content,
                        b.helpful,
                        b.harmful,
                        json.dumps(b.provenance),
                        b.created_at,
                        b.updated_at,
                        seq,
                    ),
                )
            if next_seq is not None:
                current = cur.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
                value = max(next_seq, int(current[0]) if current else 1)
                cur.execute(
                    "INSERT INTO meta (key, value) VALUES ('next_seq', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(value),),
                )
        return len(rows)


_JSON_FIELDS = {f.name for f in fields(Bullet)}


def _bullet_from_json(index: int, row: Any) -> Bullet:
    """A :class:`Bullet` from one exported entry, every field type-checked."""
    where = f"bullets[{index}]"
    if not isinstance(row, Mapping):
        raise DeltaError(f"{where} must be an object, got {type(row).__name__}")
    unknown = sorted(set(row) - _JSON_FIELDS)
    if unknown:
        raise DeltaError(f"{where} has unknown fields {unknown}; allowed: {sorted(_JSON_FIELDS)}")
    for name in ("id", "section", "content"):
        if not isinstance(row.get(name), str):
            got = row.get(name)
            raise DeltaError(f"{where}.{name} must be a string, got {got!r:.60}")
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", row["id"]):
        raise DeltaError(
            f"{where}.id must be 1-64 letters, digits or '_.:-', got {row['id']!r:.60}"
        )
    try:
        Delta.add(row["section"], row["content"])  # validates section and content
    except DeltaError as err:
        raise DeltaError(f"{where}: {err}") from None
    for name in ("helpful", "harmful", "seq"):
        value = row.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DeltaError(f"{where}.{name} must be an integer >= 0, got {value!r:.60}")
    for name in ("created_at", "updated_at"):
        value = row.get(name, 0.0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise DeltaError(f"{where}.{name} must be a finite number, got {value!r:.60}")
    provenance = row.get("provenance", {})
    if not isinstance(provenance, Mapping) or not all(isinstance(k, str) for k in provenance):
        raise DeltaError(f"{where}.provenance must be an object, got {provenance!r:.60}")
    try:
        json.dumps(provenance, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise DeltaError(f"{where}.provenance is not plain JSON: {err}") from None
    return Bullet(
        id=row["id"],
        section=row["section"],
        content=row["content"],
        helpful=row.get("helpful", 0),
        harmful=row.get("harmful", 0),
        provenance=dict(provenance),
        created_at=float(row.get("created_at", 0.0)),
        updated_at=float(row.get("updated_at", 0.0)),
        seq=row.get("seq", 0),
    )


@contextmanager
def _nullcontext() -> Iterator[None]:
    yield

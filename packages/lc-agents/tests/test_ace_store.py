"""The ACE playbook store: delta semantics, validation, counters, rendering, durability."""

from __future__ import annotations

import doctest
import json
import multiprocessing
import subprocess
import sys
import textwrap
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_agents.ace as ace_pkg
from lc_agents.ace import (
    Delta,
    DeltaError,
    PlaybookStore,
    UnknownBulletError,
    adapt,
    baseline,
    dedup,
    deltas,
    parsing,
    roles,
    store,
)

SECTIONS = ["rules", "units", "api"]


@pytest.mark.parametrize("module", [ace_pkg, adapt, baseline, dedup, deltas, parsing, roles, store])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


# --------------------------------------------------------------------------- properties
class ReferencePlaybook:
    """A plain-dict model of the delta semantics the store must reproduce."""

    def __init__(self) -> None:
        self.items: dict[str, dict] = {}
        self.seq = 0

    def apply(self, op: Delta) -> str:
        if op.op == "ADD":
            self.seq += 1
            new_id = f"{op.section}-{self.seq:05d}"
            self.items[new_id] = {
                "section": op.section,
                "content": op.content,
                "helpful": 0,
                "harmful": 0,
                "seq": self.seq,
            }
            return new_id
        if op.op == "UPDATE":
            b = self.items[op.ids[0]]
            b["content"] = op.content or b["content"]
            b["section"] = op.section or b["section"]
            return op.ids[0]
        if op.op == "MERGE":
            parts = [self.items[i] for i in op.ids]
            head = parts[0]
            head["helpful"] = sum(p["helpful"] for p in parts)
            head["harmful"] = sum(p["harmful"] for p in parts)
            head["content"] = op.content or head["content"]
            for i in op.ids[1:]:
                del self.items[i]
            return op.ids[0]
        del self.items[op.ids[0]]
        return op.ids[0]

    def tag(self, bullet_id: str, tag: str) -> None:
        if tag != "neutral":
            self.items[bullet_id][tag] += 1

    def snapshot(self) -> list[tuple]:
        rows = sorted(self.items.items(), key=lambda kv: kv[1]["seq"])
        return [(k, v["section"], v["content"], v["helpful"], v["harmful"]) for k, v in rows]


def snapshot(s: PlaybookStore) -> list[tuple]:
    return [(b.id, b.section, b.content, b.helpful, b.harmful) for b in s.bullets()]


text = st.text(alphabet="abcdefgh xyz0123456789", min_size=1, max_size=20).filter(
    lambda t: t.strip()
)


@settings(max_examples=40)
@given(data=st.data())
def test_applying_deltas_in_order_matches_the_reference(data):
    s, ref = PlaybookStore(), ReferencePlaybook()
    for _batch in range(data.draw(st.integers(1, 4), label="batches")):
        ops, tags = [], []
        # plan the batch against a scratch copy of the reference so ids are valid in order
        scratch = ReferencePlaybook()
        scratch.items = {k: dict(v) for k, v in ref.items.items()}
        scratch.seq = ref.seq
        for _ in range(data.draw(st.integers(0, 6), label="ops")):
            ids = sorted(scratch.items)
            kinds = (
                ["ADD"]
                + (["UPDATE", "DELETE"] if ids else [])
                + (["MERGE"] if len(ids) >= 2 else [])
            )
            kind = data.draw(st.sampled_from(kinds))
            if kind == "ADD":
                op = Delta.add(data.draw(st.sampled_from(SECTIONS)), data.draw(text))
            elif kind == "UPDATE":
                new_section = data.draw(st.none() | st.sampled_from(SECTIONS))
                content = data.draw(text) if new_section is None else data.draw(st.none() | text)
                op = Delta.update(data.draw(st.sampled_from(ids)), content, section=new_section)
            elif kind == "MERGE":
                chosen = data.draw(
                    st.lists(st.sampled_from(ids), min_size=2, max_size=3, unique=True)
                )
                op = Delta.merge(chosen, data.draw(st.none() | text))
            else:
                op = Delta.delete(data.draw(st.sampled_from(ids)))
            scratch.apply(op)
            ops.append(op)
        if ref.items:
            for _ in range(data.draw(st.integers(0, 3), label="tags")):
                tags.append(
                    (
                        data.draw(st.sampled_from(sorted(ref.items))),
                        data.draw(st.sampled_from(["helpful", "harmful", "neutral"])),
                    )
                )
        for bullet_id, tag in tags:  # the store applies tags before the deltas
            ref.tag(bullet_id, tag)
        expected = [ref.apply(op) for op in ops]
        report = s.apply(ops, tags=tags)
        assert report.results == expected
        assert snapshot(s) == ref.snapshot()
    assert len({b.id for b in s.bullets()}) == len(s)


@settings(max_examples=25)
@given(contents=st.lists(text, min_size=1, max_size=8), bad=st.integers(0, 7))
def test_a_batch_with_an_unknown_id_writes_nothing(contents, bad):
    s = PlaybookStore()
    s.apply([Delta.add("rules", "kept")])
    before, rev = snapshot(s), s.revision()
    ops = [Delta.add("rules", c) for c in contents]
    ops.insert(min(bad, len(ops)), Delta.delete("rules-99999"))
    with pytest.raises(UnknownBulletError, match="rules-99999"):
        s.apply(ops)
    assert snapshot(s) == before
    assert s.revision() == rev


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Delta.add("rules", "   "), "content must not be empty"),
        (lambda: Delta.add("", "x"), "section must not be empty"),
        (lambda: Delta.merge(["rules-00001", "rules-00001"]), "MERGE of a bullet with itself"),
        (lambda: Delta.merge(["rules-00001"]), "at least two ids"),
        (lambda: Delta.merge("rules-00001"), "sequence of ids"),
        (lambda: Delta.update("rules-00001"), "new content or a new section"),
        (lambda: Delta.update("rules-00001", ""), "content must not be empty"),
        (lambda: Delta("RENAME", ids=("a-00001",)), "allowed"),
        (lambda: Delta("ADD", ids=("a-00001",), section="s", content="c"), "ADD takes no ids"),
        (lambda: Delta("DELETE", ids=("a-00001",), content="c"), "DELETE takes no content"),
        (lambda: Delta.from_dict({"id": "a-00001"}), "no op"),
        (lambda: Delta.from_dict({"op": "add", "section": "s"}), "non-empty content"),
        (lambda: Delta.from_dict(["ADD"]), "must be a mapping"),
    ],
)
def test_malformed_deltas_are_rejected_with_a_clear_error(make, message):
    with pytest.raises(DeltaError, match=message):
        make()


def test_unknown_ids_are_reported_per_operation():
    s = PlaybookStore()
    s.apply([Delta.add("rules", "a"), Delta.add("rules", "b")])
    for op in [
        Delta.update("rules-00042", "x"),
        Delta.merge(["rules-00001", "rules-00042"]),
        Delta.delete("x-00001"),
    ]:
        with pytest.raises(UnknownBulletError, match=r"deltas\[0\]"):
            s.apply([op])
    # a merged-away id is unknown to later operations of the same batch
    with pytest.raises(UnknownBulletError, match=r"deltas\[1\].*rules-00002"):
        s.apply([Delta.merge(["rules-00001", "rules-00002"]), Delta.update("rules-00002", "late")])
    assert [b.content for b in s.bullets()] == ["a", "b"]


def test_skip_mode_applies_the_valid_operations_and_lists_the_rest():
    s = PlaybookStore()
    report = s.apply(
        [Delta.add("rules", "a"), Delta.delete("rules-00077"), Delta.add("units", "b")],
        on_invalid="skip",
    )
    assert report.results == ["rules-00001", None, "units-00002"]
    assert report.rejected[0][0] == 1
    assert "rules-00077" in report.rejected[0][1]
    with pytest.raises(ValueError, match="on_invalid"):
        s.apply([], on_invalid="ignore")  # type: ignore[arg-type]


def test_delta_json_round_trip():
    ops = [
        Delta.add("rules", "a", role="curator"),
        Delta.update("rules-00001", "b", section="units"),
        Delta.merge(["a-00001", "a-00002"], "c"),
        Delta.delete("a-00003"),
    ]
    assert [Delta.from_dict(json.loads(json.dumps(op.to_dict()))) for op in ops] == ops
    assert Delta.from_dict({"operation": "delete", "bullet_id": "a-00001"}) == Delta.delete(
        "a-00001"
    )


# --------------------------------------------------------------------------- counters
def test_reflector_tags_update_the_counters_and_merge_sums_them():
    s = PlaybookStore()
    s.apply([Delta.add("rules", "a"), Delta.add("rules", "b")])
    report = s.apply(
        tags=[
            ("rules-00001", "helpful"),
            ("rules-00001", "Helpful"),
            ("rules-00002", "harmful"),
            ("x-00009", "helpful"),
        ]
    )
    assert report.unknown_tags == ["x-00009"]
    assert (s.get("rules-00001").helpful, s.get("rules-00001").harmful) == (2, 0)
    assert (s.get("rules-00002").helpful, s.get("rules-00002").harmful) == (0, 1)
    s.apply(tags={"rules-00002": "neutral"})
    assert s.get("rules-00002").helpful + s.get("rules-00002").harmful == 1
    with pytest.raises(DeltaError, match="tag is 'great'"):
        s.apply(tags={"rules-00001": "great"})
    s.apply([Delta.merge(["rules-00002", "rules-00001"])])
    merged = s.get("rules-00002")
    assert (merged.helpful, merged.harmful, merged.content) == (2, 1, "b")
    assert merged.provenance["merged_from"] == ["rules-00001"]
    assert "rules-00001" not in s


def test_timestamps_and_provenance():
    now = iter([100.0, 200.0, 300.0])
    s = PlaybookStore(clock=lambda: next(now))
    s.apply([Delta.add("rules", "a", role="curator", step=3)])
    s.apply([Delta.update("rules-00001", "a2", role="editor")])
    b = s.get("rules-00001")
    assert (b.created_at, b.updated_at) == (100.0, 200.0)
    assert b.provenance == {"role": "editor", "step": 3}


# --------------------------------------------------------------------------- rendering / export
def test_render_puts_the_most_useful_bullets_first_within_the_budget():
    s = PlaybookStore()
    s.apply([Delta.add("rules", f"rule number {i}") for i in range(5)])
    s.apply(
        tags=[("rules-00004", "helpful")] * 3
        + [("rules-00002", "helpful"), ("rules-00001", "harmful")]
    )
    order = [b.id for b in s.select()]
    assert order == ["rules-00004", "rules-00002", "rules-00003", "rules-00005", "rules-00001"]
    line = len(s.get("rules-00004").line()) + 1
    assert [b.id for b in s.select(budget=2 * line + 1)] == ["rules-00004", "rules-00002"]
    assert s.select(budget=0) == []
    # with a token counter the budget is in tokens
    words = [b.id for b in s.select(budget=14, count_tokens=lambda t: len(t.split()))]
    assert words == ["rules-00004", "rules-00002"]
    text = s.render(budget=2 * line + 1)
    assert text.splitlines()[0] == "## rules"
    assert "rule number 0" not in text
    with pytest.raises(ValueError, match="budget"):
        s.select(budget=-1)


def test_markdown_and_json_export_and_import():
    s = PlaybookStore()
    s.apply([Delta.add("rules", "a"), Delta.add("units", "cents"), Delta.add("rules", "b")])
    s.apply(tags={"units-00002": "helpful"})
    md = s.to_markdown()
    assert md.split("\n\n") == [
        "## rules\n- [rules-00001] (+0/-0) a\n- [rules-00003] (+0/-0) b",
        "## units\n- [units-00002] (+1/-0) cents",
    ]
    copy = PlaybookStore()
    assert copy.load_json(s.to_json()) == 3
    assert snapshot(copy) == snapshot(s)
    assert copy.apply([Delta.add("rules", "new")]).results == ["rules-00004"]
    with pytest.raises(DeltaError, match="already exists"):
        copy.load_json(s.to_json())


def test_json_round_trip_keeps_the_id_counter():
    s = PlaybookStore()
    s.apply([Delta.add("rules", "a"), Delta.add("rules", "b"), Delta.add("rules", "c")])
    s.apply([Delta.delete("rules-00003")])
    copy = PlaybookStore()
    copy.load_json(s.to_json())
    # the deleted id is not handed out again: later ADDs match the original's
    assert copy.apply([Delta.add("rules", "d")]).results == ["rules-00004"]
    assert s.apply([Delta.add("rules", "d")]).results == ["rules-00004"]
    assert snapshot(copy) == snapshot(s)
    legacy = json.loads(s.to_json())
    del legacy["next_seq"]  # documents written before next_seq still load
    assert PlaybookStore().load_json(json.dumps(legacy)) == 3


@pytest.mark.parametrize("value", [0, -2, "7", 2.5, True])
def test_load_json_refuses_a_bad_next_seq(value):
    data = {"bullets": [], "next_seq": value}
    store = PlaybookStore()
    with pytest.raises(DeltaError, match="next_seq"):
        store.load_json(json.dumps(data))
    assert len(store) == 0


def test_progress_markers_persist_on_disk(tmp_path):
    path = tmp_path / "pb.sqlite"
    s = PlaybookStore(path)
    s.apply([Delta.add("rules", "a")], progress=("run", {"done": 1, "note": [1, 2]}))
    again = PlaybookStore(path)
    assert again.get_progress("run") == {"done": 1, "note": [1, 2]}
    assert again.get_progress("other") == {}
    assert snapshot(again) == snapshot(s)
    assert again.history()[0]["ops"]["deltas"][0]["result"] == "rules-00001"


# --------------------------------------------------------------------------- durability
CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from lc_agents.ace import Delta, PlaybookStore
    store = PlaybookStore(sys.argv[1])
    def die(i):
        if i == 1:
            os._exit(3)  # the process dies in the middle of the batch
    store._after_op = die
    store.apply([Delta.add("rules", "one"), Delta.update("rules-00001", "changed"), Delta.add("rules", "two")],
                tags={"rules-00001": "helpful"}, progress=("run", {"done": 9}))
    """
)


def test_a_crash_mid_batch_leaves_no_partial_write(tmp_path):
    path = tmp_path / "pb.sqlite"
    s = PlaybookStore(path)
    s.apply([Delta.add("rules", "original")], progress=("run", {"done": 1}))
    before = snapshot(s)
    s.close()
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(path)], capture_output=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr.decode()
    after = PlaybookStore(path)
    assert snapshot(after) == before
    assert after.get_progress("run") == {"done": 1}
    assert after.revision() == 1
    # the store still works after the crash
    assert after.apply([Delta.add("rules", "next")]).results == ["rules-00002"]


def test_an_exception_mid_batch_rolls_back_in_process():
    s = PlaybookStore()
    s.apply([Delta.add("rules", "a")])

    def boom(i: int) -> None:
        if i == 1:
            raise RuntimeError("disk on fire")

    s._after_op = boom
    with pytest.raises(RuntimeError):
        s.apply(
            [Delta.update("rules-00001", "b"), Delta.add("rules", "c")],
            tags={"rules-00001": "helpful"},
        )
    s._after_op = None
    assert snapshot(s) == [("rules-00001", "rules", "a", 0, 0)]


def _curate(path: str, worker: int, rounds: int) -> None:
    s = PlaybookStore(path)
    for r in range(rounds):
        s.apply([Delta.add("rules", f"worker {worker} round {r}")], tags={"rules-00001": "helpful"})
        s.apply(tags={"rules-00001": "harmful"})


def test_concurrent_curators_in_processes_lose_no_updates(tmp_path):
    path = str(tmp_path / "pb.sqlite")
    PlaybookStore(path).apply([Delta.add("rules", "shared")])
    ctx = multiprocessing.get_context("fork")
    workers, rounds = 4, 15
    procs = [ctx.Process(target=_curate, args=(path, w, rounds)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = PlaybookStore(path)
    shared = s.get("rules-00001")
    assert (shared.helpful, shared.harmful) == (workers * rounds, workers * rounds)
    assert len(s) == 1 + workers * rounds
    contents = {b.content for b in s.bullets()}
    assert all(f"worker {w} round {r}" in contents for w in range(workers) for r in range(rounds))


def test_concurrent_curators_in_threads_lose_no_updates(tmp_path):
    for path in [str(tmp_path / "pb.sqlite"), ":memory:"]:
        s = PlaybookStore(path)
        s.apply([Delta.add("rules", "shared")])
        threads = [threading.Thread(target=_curate_thread, args=(s, w)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert s.get("rules-00001").helpful == 4 * 20
        assert len(s) == 1 + 4 * 20
        assert len({b.id for b in s.bullets()}) == len(s)


def _curate_thread(s: PlaybookStore, worker: int) -> None:
    for r in range(20):
        s.apply([Delta.add("rules", f"{worker}-{r}")], tags={"rules-00001": "helpful"})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("helpful", "many", r"bullets\[1\]\.helpful must be an integer"),
        ("harmful", -1, r"bullets\[1\]\.harmful must be an integer >= 0"),
        ("helpful", True, r"bullets\[1\]\.helpful"),
        ("seq", 1.5, r"bullets\[1\]\.seq"),
        ("created_at", "yesterday", r"bullets\[1\]\.created_at must be a finite number"),
        ("provenance", [1, 2], r"bullets\[1\]\.provenance must be an object"),
        ("content", 7, r"bullets\[1\]\.content must be a string"),
        ("content", "  ", r"bullets\[1\].*must not be empty"),
        ("section", None, r"bullets\[1\]\.section must be a string"),
        ("id", "a b\nc", r"bullets\[1\]\.id"),
        ("colour", "red", r"bullets\[1\] has unknown fields \['colour'\]"),
    ],
)
def test_load_json_refuses_a_malformed_entry_and_writes_nothing(field, value, message):
    src = PlaybookStore()
    src.apply([Delta.add("rules", "a"), Delta.add("rules", "b")])
    data = json.loads(src.to_json())
    data["bullets"][1][field] = value
    dst = PlaybookStore()
    dst.apply([Delta.add("units", "cents")])
    with pytest.raises(DeltaError, match=message):
        dst.load_json(json.dumps(data))
    assert snapshot(dst) == [("units-00001", "units", "cents", 0, 0)]
    dst.render()  # the store stays readable
    assert [b.id for b in dst.bullets()] == ["units-00001"]


def test_load_json_refuses_repeated_ids_and_bad_documents():
    src = PlaybookStore()
    src.apply([Delta.add("rules", "a")])
    data = json.loads(src.to_json())
    data["bullets"].append(dict(data["bullets"][0]))
    with pytest.raises(DeltaError, match="appears twice"):
        PlaybookStore().load_json(json.dumps(data))
    with pytest.raises(DeltaError, match="does not parse"):
        PlaybookStore().load_json("{not json")
    with pytest.raises(DeltaError, match=r"bullets\[0\] must be an object"):
        PlaybookStore().load_json('{"bullets": [3]}')

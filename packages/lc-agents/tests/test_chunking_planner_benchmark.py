"""The Qwen chunking-planner benchmark's tasks, resume, analysis, JSON and CLI.

No real model runs here: :class:`ScriptedWorker` stands in for the workers. It reads its
chunk the way the tasks define (a ``lookup`` line; for ``scoped``, the class header and
the attribute line in the same chunk) and answers right only if its chunk is at most
``max_chars`` characters long (a reader whose confusion grows with length); otherwise,
or when its chunk lacks what it needs, it writes a wrong four-digit number with a lower
log-probability. Chunks are counted in characters (:class:`CharTokenizer`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _load import load_script  # the scripts' folder, on the path above

bench = load_script("chunking_planner_qwen")

SMALL = {
    "tasks": ("lookup", "scoped"),
    "items": 8,
    "pilot_items": 3,
    "lines": 16,
    "sizes": (48, 96, 192),
    "pilot_sizes": (48, 192),
    "batch": 4,
}


class CharTokenizer:
    """One token per character (round-trips exactly)."""

    def encode(self, text: str, **_: Any) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


class ScriptedWorker:
    """Right iff the chunk holds what the task needs and is at most ``max_chars`` long."""

    def __init__(self, max_chars: int = 200) -> None:
        self.max_chars = max_chars
        self.calls = 0

    def answer(self, prompt: str) -> str:
        chunk = prompt.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
        var = re.search(r"value of `([^`]+)`", prompt).group(1)  # type: ignore[union-attr]
        found = None
        if "." in var:  # scoped: the class header and its attribute, both in this chunk
            cls, attr = var.split(".")
            block = chunk.split(f"class {cls}:\n", 1)
            if len(block) == 2:
                m = re.search(rf"^    {attr} = (\d{{4}})$", block[1].split("\n\n")[0], re.M)
                found = m.group(1) if m else None
        else:
            m = re.search(rf"^{re.escape(var)} = (\d{{4}})$", chunk, re.M)
            found = m.group(1) if m else None
        if found is not None and len(chunk) <= self.max_chars:
            return f"{found} (logprob -0.1000)"
        wrong = 1000 + int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 9000
        if wrong == int(found or 0):
            wrong = 1000 + (wrong - 999) % 9000
        return f"{wrong} (logprob -2.5000)"

    def chat_batch(self, conversations: Any, **options: Any) -> list[str]:
        assert options.get("max_tokens") == 6
        self.calls += len(conversations)
        return [self.answer(m[-1]["content"]) for m in conversations]

    def chat(self, messages: Any, **options: Any) -> str:
        return self.chat_batch([messages], **options)[0]


def _run(tmp_path: Path, worker: ScriptedWorker, **kw: Any) -> tuple[Any, Any, int]:
    settings = bench.Settings(**{**SMALL, **kw})
    records = bench.Records(tmp_path / "r_records.jsonl")
    done = bench.run_all(worker, CharTokenizer(), settings, records, log=lambda _: None)
    return settings, records, done


def _expected_cells(settings: Any) -> int:
    per_task = settings.pilot_items * (len(settings.pilot_sizes) + 1) + settings.items * (
        len(settings.sizes) + 1
    )
    return per_task * len(settings.tasks)


# ---------------------------------------------------------------------------- tasks
@pytest.mark.parametrize("task", ["lookup", "scoped", "update", "alias"])
def test_items_are_seeded_and_their_gold_follows_from_the_code(task: str) -> None:
    a = bench.make_item(task, "heldout", 3, 0, 32)
    assert a == bench.make_item(task, "heldout", 3, 0, 32)
    assert a["context"] != bench.make_item(task, "pilot", 3, 0, 32)["context"]
    assert a["context"] != bench.make_item(task, "heldout", 3, 1, 32)["context"]
    assert re.fullmatch(r"\d{4}", a["answer"])
    assert a["var"] in a["question"]
    for line in a["needed"]:
        assert a["context"].split("\n").count(line) == 1
    if task == "scoped":  # run the code: the gold is the class attribute's value
        scope: dict[str, Any] = {}
        exec(a["context"], scope)
        cls, attr = a["var"].split(".")
        assert str(getattr(scope[cls], attr)) == a["answer"]
    else:
        scope = {}
        exec(a["context"], scope)
        assert str(scope[a["var"]]) == a["answer"]
    if task == "update":
        assert len(a["needed"]) == 2
        assert a["needed"][1] == f"{a['var']} = {a['answer']}"


def test_scoped_attribute_line_alone_is_ambiguous() -> None:
    item = bench.make_item("scoped", "pilot", 0, 0, 32)
    attr = item["var"].split(".")[1]
    hits = re.findall(rf"^    {attr} = \d{{4}}$", item["context"], re.M)
    assert len(hits) == 4  # one per class: the header is needed to choose


def test_table_gold_is_the_asked_cell_and_needs_the_header() -> None:
    import csv

    item = bench.make_item("table", "heldout", 5, 0, 32)
    assert item == bench.make_item("table", "heldout", 5, 0, 32)
    assert item["context"] != bench.make_item("table", "pilot", 5, 0, 32)["context"]
    header, *rows = list(csv.reader(item["context"].split("\n")))
    assert header[0] == "name"
    assert len(header) == 4
    assert len(rows) == 16
    table = {r[0]: dict(zip(header[1:], r[1:], strict=True)) for r in rows}
    assert len(table) == 16  # row names are unique
    row, column = item["var"].split(".")
    assert f" {column} of {row}?" in item["question"]
    assert table[row][column] == item["answer"]
    # the row line alone holds three four-digit values: only the header says which is asked
    header_line, row_line = item["needed"]
    assert header_line == item["context"].split("\n")[0]
    assert len(re.findall(r"\b\d{4}\b", row_line)) == 3
    assert bench.TEMPLATES["table"].startswith("```csv\n")


def test_pilot_and_heldout_items_are_disjoint() -> None:
    settings = bench.Settings(**SMALL)
    items = bench.make_items(settings)
    pilot = {it["context"] for it in items if it["split"] == "pilot"}
    held = {it["context"] for it in items if it["split"] == "heldout"}
    assert len(pilot) == settings.pilot_items * 2
    assert len(held) == settings.items * 2
    assert not pilot & held


def test_vote_counts_four_digit_numbers_and_breaks_ties_by_confidence() -> None:
    assert bench.vote("q", ["1234 (logprob -1.0)", "5678 (logprob -0.2)"]) == "5678"
    two = ["1234 (logprob -3.0)", "1234 (logprob -2.0)", "5678 (logprob -0.1)"]
    assert bench.vote("q", two) == "1234"
    assert bench.vote("q", ["none (logprob -99.0)", "42 (logprob -0.1)"]) == "none"
    assert bench.parse_reply("It is 4417. (logprob -0.5000)") == ("It is 4417.", "4417", -0.5)


# --------------------------------------------------------------------------- resume
def test_records_resume_without_redoing_work(tmp_path: Path) -> None:
    worker = ScriptedWorker()
    settings, records, done = _run(tmp_path, worker)
    assert done == len(records) == _expected_cells(settings)
    calls = worker.calls
    assert calls > done  # chunked cells call several workers

    again = ScriptedWorker()
    _, records2, done2 = _run(tmp_path, again)
    assert done2 == 0
    assert again.calls == 0
    assert records2.rows == records.rows

    # drop the last three cells and a torn line: only those three are run again
    lines = records.path.read_text().splitlines()
    records.path.write_text("\n".join(lines[:-3]) + '\n{"task": "lookup", "it')
    third = ScriptedWorker()
    _, records3, done3 = _run(tmp_path, third)
    assert done3 == 3
    assert set(records3.rows) == set(records.rows)
    for key, row in records.rows.items():
        assert records3.rows[key]["correct"] == row["correct"]


def test_time_budget_stops_before_the_next_cell(tmp_path: Path) -> None:
    worker = ScriptedWorker()
    settings = bench.Settings(**SMALL)
    records = bench.Records(tmp_path / "r_records.jsonl")
    messages: list[str] = []
    done = bench.run_all(
        worker, CharTokenizer(), settings, records, deadline=0.0, log=messages.append
    )
    assert done == 0
    assert worker.calls == 0
    assert not records.path.exists()
    assert any("time budget" in m for m in messages)


def test_run_order_keeps_held_out_items_paired(tmp_path: Path) -> None:
    settings = bench.Settings(**SMALL)
    order = bench.jobs(settings, bench.make_items(settings))
    n_pilot = settings.pilot_items * 2 * (len(settings.pilot_sizes) + 1)
    assert all(it["split"] == "pilot" for it, _ in order[:n_pilot])
    held = order[n_pilot:]
    per_item = len(settings.sizes) + 1
    for start in range(0, len(held), per_item):  # each item at every size before the next
        block = held[start : start + per_item]
        assert len({it["id"] for it, _ in block}) == 1
        assert [s for _, s in block] == [*map(str, settings.sizes), "single"]


# ------------------------------------------------------------------------- analysis
def test_scripted_worker_gives_the_expected_sweep(tmp_path: Path) -> None:
    settings, records, _ = _run(tmp_path, ScriptedWorker(max_chars=200))
    result = bench.analyse(records, settings)
    lookup, scoped = result["tasks"]["lookup"]["sweep_heldout"], result["tasks"]["scoped"]
    # one pass and 192-character chunks are longer than the reader can handle
    assert lookup["single"]["accuracy"] == 0.0
    for row in lookup.values():
        assert row["n_workers"] >= 1
    for key, row in records.rows.items():
        if row["chunk_size"] > 200 and row["n_workers"] == 1:
            assert not row["correct"], key
    # scoped: a 48-character chunk never holds a class header with the asked attribute often
    assert scoped["sweep_heldout"]["48"]["accuracy"] <= scoped["sweep_heldout"]["96"]["accuracy"]


def test_best_and_ties_follow_the_definition() -> None:
    sizes = ["32", "64", "single"]
    # 20 items: 32 right on 10, 64 right on 16, single right on 15 (14 shared with 64)
    outcomes = {
        f"i{i}": {"32": i < 10, "64": i < 16, "single": i < 14 or i == 19} for i in range(20)
    }
    best, ties, tests = bench.best_and_ties(outcomes, sizes)
    assert best == "64"
    assert tests["single"] == {"only_first": 2, "only_second": 1, "p": 1.0}
    assert tests["32"]["only_first"] == 6
    assert tests["32"]["only_second"] == 0
    assert tests["32"]["p"] == pytest.approx(2 / 2**6)
    assert ties == ["64", "single"]  # 32 differs: p = 0.031 < 0.05
    # equal accuracy: the larger size (fewer workers) is named best; both are tied
    same = {f"i{i}": {"32": i < 5, "64": i >= 15, "single": False} for i in range(20)}
    best, ties, _ = bench.best_and_ties(same, sizes)
    assert best == "64"
    assert set(ties) >= {"32", "64"}


def test_mcnemar_exact_values() -> None:
    assert bench.mcnemar([True] * 5, [False] * 5)["p"] == pytest.approx(2 / 32)
    assert bench.mcnemar([True, False], [True, False])["p"] == 1.0
    with pytest.raises(ValueError, match="length"):
        bench.mcnemar([True], [True, False])


def _record(task: str, item: str, split: str, size: str, correct: bool, doc: int = 400) -> dict:
    chunk = doc if size == "single" else int(size)
    return {
        "task": task,
        "item": item,
        "split": split,
        "size": size,
        "chunk_size": chunk,
        "doc_tokens": doc,
        "n_workers": math.ceil(doc / chunk),
        "answer": "1234" if correct else "9999",
        "gold": "1234",
        "correct": correct,
        "chain_whole": True,
        "workers": [{"reply": "1234", "number": "1234", "logprob": -0.1, "holds": [True]}],
        "prompt_tokens": 100,
        "seconds": 1.0,
        "cpu_seconds": 1.0,
    }


def _id(task: str, split: str, index: int, lines: int = 32) -> str:
    return str(bench.make_item(task, split, index, 0, lines)["id"])


def _synthetic(tmp_path: Path, acc: dict[str, dict[str, float]], n: int = 40) -> Any:
    """Records whose accuracy per (task, size) is exactly ``acc`` (pilot and held-out)."""
    records = bench.Records(tmp_path / "s_records.jsonl")
    for task, by_size in acc.items():
        for split, count in (("pilot", n), ("heldout", n)):
            for i in range(count):
                for size, a in by_size.items():
                    if split == "pilot" and size not in ("32", "128", "single"):
                        continue
                    rec = _record(task, _id(task, split, i), split, size, i < round(a * count))
                    records.add(rec)
    return records


def test_planner_is_scored_against_fixed_policies(tmp_path: Path) -> None:
    acc = {  # lookup peaks at small chunks, scoped in one pass
        "lookup": {"32": 0.8, "64": 0.7, "128": 0.5, "256": 0.3, "single": 0.1},
        "scoped": {"32": 0.1, "64": 0.2, "128": 0.4, "256": 0.5, "single": 0.9},
    }
    records = _synthetic(tmp_path, acc)
    settings = bench.Settings(
        tasks=("lookup", "scoped"),
        items=40,
        pilot_items=40,
        sizes=(32, 64, 128, 256),
        pilot_sizes=(32, 128),
    )
    result = bench.analyse(records, settings)
    lookup, scoped = result["tasks"]["lookup"], result["tasks"]["scoped"]
    assert lookup["measured_best"] == "32"
    assert scoped["measured_best"] == "single"
    assert lookup["recommended"] in ("32", "64")
    assert scoped["recommended"] == "single"
    assert scoped["recommendation_is_best"] is True
    assert scoped["recommendation_tied_best"] is True
    # every size in the sweep has the planner's prediction beside it
    assert all(row["planner_predicted"] is not None for row in lookup["sweep_heldout"].values())
    pol = result["policies"]
    table = pol["table"]
    assert table["one pass"]["accuracy"] == pytest.approx((0.1 + 0.9) / 2)
    assert table["fixed 32 tokens"]["accuracy"] == pytest.approx((0.8 + 0.1) / 2)
    assert table["per-task best (hindsight)"]["accuracy"] == pytest.approx((0.8 + 0.9) / 2)
    assert pol["best_fixed_in_hindsight"] == "one pass"
    planner = table["planner"]["accuracy"]
    assert planner == pytest.approx((acc["lookup"][lookup["recommended"]] + 0.9) / 2)
    assert pol["planner_minus_best_fixed"] == pytest.approx(planner - 0.5)
    assert table["planner"]["size_per_task"] == {
        "lookup": lookup["recommended"],
        "scoped": "single",
    }


def test_incomplete_items_are_left_out_of_the_sweep(tmp_path: Path) -> None:
    records = _synthetic(tmp_path, {"lookup": {"32": 1.0, "64": 1.0, "128": 1.0, "single": 0.0}})
    settings = bench.Settings(
        tasks=("lookup",), items=40, pilot_items=40, sizes=(32, 64, 128), pilot_sizes=(32, 128)
    )
    del records.rows[("lookup", _id("lookup", "heldout", 0), "64")]
    # a record of other settings (another document length) under the same name is ignored
    records.add(_record("lookup", _id("lookup", "heldout", 0, lines=48), "heldout", "64", True))
    entry = bench.analyse(records, settings)["tasks"]["lookup"]
    assert entry["heldout_items_complete"] == 39
    assert all(row["total"] == 39 for row in entry["sweep_heldout"].values())
    assert entry["pilot_cells"]["single"]["total"] == 40


# ----------------------------------------------------------------------------- JSON
def _no_nan(text: str) -> Any:
    def bad(name: str) -> None:
        raise AssertionError(f"{name} in JSON")

    return json.loads(text, parse_constant=bad)


def test_json_has_no_nan_even_when_the_fit_is_degenerate(tmp_path: Path) -> None:
    # all correct in one pass, none chunked: beta <= 1, optimal chunk length is infinite
    records = _synthetic(
        tmp_path, {"lookup": {"32": 0.0, "64": 0.0, "128": 0.0, "single": 1.0}}, n=10
    )
    settings = bench.Settings(
        tasks=("lookup",), items=10, pilot_items=10, sizes=(32, 64, 128), pilot_sizes=(32, 128)
    )
    result = bench.summarise(records, settings, tmp_path, "s")
    data = _no_nan((tmp_path / "s.json").read_text())
    assert data["tasks"]["lookup"]["recommended"] == "single"
    assert data["tasks"]["lookup"]["planner"]["fit"]["optimal_chunk_length"] is None
    assert result["tasks"]["lookup"]["recommendation_is_best"] is True
    assert (tmp_path / "s.png").stat().st_size > 10_000
    assert bench.json_safe({"a": [math.nan, -math.inf, 1.5]}) == {"a": [None, None, 1.5]}


def test_end_to_end_summary_from_scripted_records(tmp_path: Path) -> None:
    settings, records, _ = _run(tmp_path, ScriptedWorker())
    bench.summarise(records, settings, tmp_path, "r")
    data = _no_nan((tmp_path / "r.json").read_text())
    assert data["cells"] == _expected_cells(settings)
    assert set(data["tasks"]) == {"lookup", "scoped"}
    for entry in data["tasks"].values():
        assert entry["heldout_items_complete"] == settings.items
        assert entry["recommended"] in entry["sweep_heldout"]
        assert entry["measured_best"] in entry["tied_with_best"]
    assert data["policies"]["table"]["planner"]["total"] == 2 * settings.items


def test_summarise_flag_rewrites_outputs_without_a_model(tmp_path: Path) -> None:
    settings, records, _ = _run(tmp_path, ScriptedWorker())
    argv = [
        "--summarise",
        "--out",
        str(tmp_path),
        "--name",
        "r",
        "--items",
        str(settings.items),
        "--pilot-items",
        str(settings.pilot_items),
        "--lines",
        str(settings.lines),
        "--sizes",
        *map(str, settings.sizes),
        "--pilot-sizes",
        *map(str, settings.pilot_sizes),
    ]
    result = bench.main(argv)
    assert (tmp_path / "r.json").exists()
    assert (tmp_path / "r.png").exists()
    assert result["cells"] == len(records)


# ------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sizes", "4", "64"], "sizes=[4, 64] is invalid"),
        (["--sizes", "64", "64"], "distinct"),
        (["--pilot-sizes", "48"], "pilot_sizes=[48] is invalid"),
        (["--tasks", "lookup,bogus"], "tasks=['lookup', 'bogus'] is invalid"),
        (["--tasks", ","], "tasks=[] is invalid"),
        (["--items", "0"], "items=0 is invalid"),
        (["--pilot-items", "-1"], "pilot_items=-1 is invalid"),
        (["--time-budget", "0"], "--time-budget=0.0 is invalid"),
        (["--threads", "0"], "--threads=0 is invalid"),
        (["--name", "../x"], "--name='../x' is invalid"),
        (["--dtype", "int8"], "invalid choice"),
        (["--items", "many"], "invalid int value"),
    ],
)
def test_bad_cli_input_gets_a_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_are_the_documented_full_run() -> None:
    args, settings = bench.parse_args([])
    assert settings == bench.Settings()
    assert settings.tasks == ("lookup", "scoped")
    assert (settings.items, settings.pilot_items) == (120, 24)
    assert args.dtype == "bfloat16"
    assert args.name == "chunking_planner_qwen"
    assert "chunking_planner_qwen.py" in (bench.__doc__ or "")

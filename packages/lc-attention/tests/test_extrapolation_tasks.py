"""The length-extrapolation benchmark: task generators, Wilson intervals, a resumable smoke run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "extrapolation.py"
_spec = importlib.util.spec_from_file_location("lc_extrapolation_bench", _PATH)
assert _spec is not None
assert _spec.loader is not None
E = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = E
_spec.loader.exec_module(E)

torch.set_num_threads(1)


def _statements(tokens: list[int]) -> list[tuple[int, int, int]]:
    """``(position, lhs, rhs)`` of every statement token (``lhs := rhs``)."""
    return [(i, *E.parse_assign(t)) for i, t in enumerate(tokens) if E.ASSIGN0 <= t < E.FILLER0]


def _resolve(stmts: list[tuple[int, int, int]], name: int) -> int:
    """Follow assignments back from ``name`` to a value; fails on ambiguity."""
    by_lhs: dict[int, tuple[int, int]] = {}
    for pos, lhs, rhs in stmts:
        assert lhs not in by_lhs, "a name is assigned twice: the answer would be ambiguous"
        by_lhs[lhs] = (pos, rhs)
    pos, x = by_lhs[name]
    while x >= E.N_VALUES:  # a name: the statement it refers to must come earlier
        prev, x2 = by_lhs[x]
        assert prev < pos
        pos, x = prev, x2
    return x


def _suffix(spec) -> int:
    return 3 * spec.queries - 1


@pytest.mark.parametrize("task", E.TASKS)
@pytest.mark.parametrize("extra", [0, 1, 38, 231, 974])
def test_lengths_are_exact_and_answers_unique(task, extra) -> None:
    spec = E.task_spec(task)
    length = spec.statements + _suffix(spec) + extra
    gen = torch.Generator().manual_seed(extra)
    tokens, answers = E.make_batch(spec, 8, length, gen)
    q = spec.queries
    assert tokens.shape == (8, length)
    assert tokens.dtype == torch.long
    assert answers.shape == (8, q)
    assert 1 <= q < spec.chains
    assert int(tokens.min()) >= 0
    assert int(tokens.max()) < E.VOCAB
    pos = E.query_positions(length, q)
    assert pos[-1] == length - 1
    for row, ans in zip(tokens.tolist(), answers.tolist(), strict=True):
        body, tail = row[: length - _suffix(spec)], row[length - _suffix(spec) :]
        assert all(row[p - 1] == E.QUERY for p in pos)
        assert tail.count(E.QUERY) == q
        assert E.QUERY not in body
        stmts = _statements(body)
        assert len(stmts) == spec.statements
        asked = [row[p] for p in pos]
        assert len(set(asked)) == q  # distinct chains
        assert [_resolve(stmts, n) for n in asked] == ans
        # earlier queries show their answers; the scored one is nowhere in the suffix
        assert [row[p + 1] for p in pos[:-1]] == ans[:-1]
        assert ans[-1] not in tail
        value_rhs = [rhs for _, _, rhs in stmts if rhs < E.N_VALUES]
        # one value per chain, all distinct: the answer once, the distractors' values beside it
        assert len(value_rhs) == spec.chains == len(set(value_rhs))
        assert value_rhs.count(ans[-1]) == 1
        # everything else in the body is filler
        inside = {p for p, _, _ in stmts}
        rest = [t for i, t in enumerate(body) if i not in inside]
        assert all(E.FILLER0 <= t < E.QUERY for t in rest)


def test_distractors_are_present_and_the_queried_item_varies() -> None:
    gen = torch.Generator().manual_seed(0)
    mk, va = E.task_spec("multikey"), E.task_spec("vartrack")
    assert mk.chains >= 4
    assert mk.hops == 1
    assert va.chains >= 2
    assert va.hops >= 2
    # fewer queries than chains: at least two candidates remain for the scored query
    assert mk.chains - mk.queries >= 2
    assert va.chains - va.queries >= 1
    depths, picked = [], set()
    for _ in range(200):
        tokens, answers, head = E.make_example(mk, 512, gen)
        stmts = _statements(tokens[: 512 - _suffix(mk)])
        names = [lhs for _, lhs, _ in stmts]
        picked.add(names.index(tokens[-1]))
        assert E.parse_assign(tokens[head]) == (tokens[-1], answers[-1])
        depths.append(head / 512)
    assert picked == set(range(mk.chains))  # every position of the pair list gets asked
    assert min(depths) < 0.1
    assert max(depths) > 0.8


def test_vartrack_chains_cross_the_sequence() -> None:
    spec = E.task_spec("vartrack")
    gen = torch.Generator().manual_seed(1)
    spans = []
    for _ in range(50):
        tokens, _, head = E.make_example(spec, 2048, gen)
        stmts = _statements(tokens[: 2048 - _suffix(spec)])
        last = next(p for p, lhs, _ in stmts if lhs == tokens[-1])
        assert head < last
        spans.append(last - head)
    assert max(spans) > 256  # links land in different chunks


def test_too_short_and_bad_specs_raise() -> None:
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="length must be >= 14"):
        E.make_example(E.task_spec("multikey"), 13, gen)
    with pytest.raises(ValueError, match="queries must lie in"):
        E.task_spec("vartrack", queries=4)
    with pytest.raises(ValueError, match="task must be one of"):
        E.task_spec("copy")


def test_statement_tokens_round_trip_and_embeddings_start_tied() -> None:
    seen = set()
    for lhs in range(E.NAME0, E.ASSIGN0):
        for rhs in range(E.N_RHS):
            tok = E.assign_token(lhs, rhs)
            assert E.ASSIGN0 <= tok < E.FILLER0
            assert E.parse_assign(tok) == (lhs, rhs)
            seen.add(tok)
    assert len(seen) == E.FILLER0 - E.ASSIGN0
    with pytest.raises(ValueError, match="no statement token"):
        E.assign_token(0, 0)
    args = E.parse(["--dim=16"])
    model = E.build("nope", args, 0)
    emb = model.embed.weight
    tok = E.assign_token(E.NAME0 + 3, 5)
    torch.testing.assert_close(emb[tok], (emb[E.NAME0 + 3] + emb[5]) / 2**0.5)


def test_wilson_interval_known_values() -> None:
    lo, hi = E.wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4)
    assert hi == pytest.approx(0.5962, abs=1e-4)
    lo, hi = E.wilson(0, 100)
    assert lo == 0.0
    assert hi == pytest.approx(0.0370, abs=1e-4)
    lo, hi = E.wilson(100, 100)
    assert hi == 1.0
    assert lo == pytest.approx(0.9630, abs=1e-4)


def test_train_lengths_are_chunk_multiples() -> None:
    assert E.train_lengths(128, 32, 16) == [32, 48, 64, 80, 96, 112, 128]
    assert E.train_lengths(32, 64, 8) == [32]


def _smoke_args(tmp: Path) -> list[str]:
    return [
        "--methods=nope,hsa",
        "--seeds=0",
        "--train-len=32",
        "--min-train-len=32",
        "--steps=2",
        "--batch=2",
        "--dim=16",
        "--layers=2",
        "--chunk-size=8",
        "--window=8",
        "--mults=1,2",
        "--items=3",
        "--no-plot",
        f"--out={tmp / 'out'}",
        f"--ckpt-dir={tmp / 'ckpt'}",
    ]


def test_smoke_run_resumes_without_retraining(tmp_path: Path) -> None:
    args = _smoke_args(tmp_path)
    E.main(args)
    rec_path = tmp_path / "out" / "extrapolation_records.jsonl"
    first = [json.loads(x) for x in rec_path.read_text().splitlines()]
    cells = {(r["method"], r["seed"], r["task"], r["length"]) for r in first}
    assert len(first) == len(cells) == 2 * 2 * 2  # methods x tasks x lengths
    ckpts = sorted((tmp_path / "ckpt").glob("*.pt"))
    assert [p.name for p in ckpts] == ["extrapolation-hsa-seed0.pt", "extrapolation-nope-seed0.pt"]
    stamps = {p: p.stat().st_mtime_ns for p in ckpts}
    summary = json.loads((tmp_path / "out" / "extrapolation.json").read_text())
    assert set(summary["results"]) == {"nope", "hsa"}
    cell = summary["results"]["hsa"]["multikey"]["64"]
    assert cell["items"] == 3
    assert cell["mult"] == 2
    assert len(cell["wilson95"]) == 2

    # a complete rerun adds nothing
    E.main(args)
    assert rec_path.read_text().splitlines() == [json.dumps(r) for r in first]

    # an interruption: the last three cells are lost and the last line is cut
    lines = rec_path.read_text().splitlines()
    rec_path.write_text("\n".join(lines[:5]) + "\n" + lines[5][:10])
    E.main(args)
    again = E.read_records(rec_path)
    assert len(again) == 8
    # the models were loaded, not retrained, and the redone cells reproduce the lost ones
    assert {p: p.stat().st_mtime_ns for p in ckpts} == stamps
    key = lambda r: (r["method"], r["task"], r["length"])  # noqa: E731
    assert sorted((key(r), r["correct"]) for r in again) == sorted(
        (key(r), r["correct"]) for r in first
    )


def test_rates_from_reuses_a_selection(tmp_path: Path) -> None:
    sel = tmp_path / "old_selection.json"
    sel.write_text(json.dumps({"chosen": {"nope": 1e-3, "hsa": 3e-3}}))
    args = [*_smoke_args(tmp_path), "--mults=1", "--tag=longer", f"--rates-from={sel}"]
    E.main(args)
    out = tmp_path / "out"
    by_rate = {
        rate: {r["method"] for r in E.read_records(out / f"longer_lr{rate}_records.jsonl")}
        for rate in ("1e-3", "3e-3")
    }
    assert by_rate == {"1e-3": {"nope"}, "3e-3": {"hsa"}}
    selected = json.loads((out / "longer_selected.json").read_text())
    assert selected["lr_per_method"] == {"nope": 1e-3, "hsa": 3e-3}
    assert selected["selection"]["reused_from"] == "old_selection.json"
    assert not (out / "longer_selection.json").exists()  # nothing was selected anew

    sel.write_text(json.dumps({"chosen": {"nope": 1e-3}}))
    with pytest.raises(SystemExit, match="no chosen rate"):
        E.main(args)
    with pytest.raises(SystemExit, match="give one"):
        E.main([*args, "--lr-grid=1e-3"])

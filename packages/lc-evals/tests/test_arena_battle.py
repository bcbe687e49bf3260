"""Battles end to end on a tiny real repository, the verdict rules, the leaderboard,
and resuming an arena from its JSON Lines store."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sys

import pytest

from lc_evals.arena import (
    ArenaStore,
    BattleConfig,
    Issue,
    RunResult,
    SandboxLimits,
    ScriptedModel,
    baseline_runs,
    expected_score,
    judge,
    leaderboard,
    load_issue,
    make_diff,
    run_arena,
    run_battle,
    run_sandboxed,
    sandbox,
    whole_file_context,
)
from lc_evals.arena.patch import PatchError, check_review, check_submission, protected_reason
from lc_evals.arena.prompts import REVIEWER_SYSTEM, read_review
from lc_evals.arena.sandbox import IsolationUnavailable, isolation_status

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")


@pytest.fixture(scope="module")
def isolated() -> None:
    ok, why = isolation_status()
    if not ok:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI must run the arena battles, but: {why}", pytrace=False)
        pytest.skip(why)


BUGGY = '''def clamp(x, lo, hi):
    """Limit x to the interval [lo, hi]."""
    if x < lo:
        return lo
    return x
'''
FIXED = BUGGY.replace("    return x\n", "    if x > hi:\n        return hi\n    return x\n")
WRONG = BUGGY.replace("    return x\n", "    return min(x, hi - 1)\n")  # off by one
BROKEN = BUGGY.replace("    return x\n", "    return hi\n")  # breaks the existing tests
REPO_TESTS = (
    "from mathx.core import clamp\n\n\n"
    "def test_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
    "def test_below():\n    assert clamp(-3, 0, 10) == 0\n"
)
GOOD_TESTS = (
    "from mathx.core import clamp\n\n\n"
    "def test_above():\n    assert clamp(15, 0, 10) == 10\n\n\n"
    "def test_at_the_edge():\n    assert clamp(10, 0, 10) == 10\n"
)
BAD_TESTS = (
    "from mathx.core import clamp\n\n\ndef test_above():\n    assert clamp(15, 0, 10) == 15\n"
)
LIMITS = SandboxLimits(cpu_seconds=20, memory_bytes=1024**3, max_processes=32, wall_seconds=60)
CONFIG = BattleConfig(limits=LIMITS)


def _fence(diff: str) -> str:
    return f"Here is my answer.\n```diff\n{diff}```\n"


def patch_to(new_source: str) -> str:
    return _fence(make_diff("mathx/core.py", BUGGY, new_source))


def review_reply(source: str) -> str:
    return _fence(make_diff("tests/test_issue.py", None, source))


@pytest.fixture(scope="module")
def issue(tmp_path_factory: pytest.TempPathFactory) -> Issue:
    root = tmp_path_factory.mktemp("mathx")
    (root / "mathx").mkdir()
    (root / "mathx" / "__init__.py").write_text("")
    (root / "mathx" / "core.py").write_text(BUGGY)
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(REPO_TESTS)
    return Issue(
        id="mathx-1",
        repo=str(root),
        description="clamp(15, 0, 10) returns 15: values above hi must be limited to hi.",
        gold_patch=make_diff("mathx/core.py", BUGGY, FIXED),
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


@pytest.fixture(scope="module")
def baseline(issue: Issue, isolated: None) -> dict[str, RunResult]:
    return baseline_runs(issue, LIMITS)


def test_baseline_original_passes_repo_ci_and_gold_passes(baseline: dict[str, RunResult]) -> None:
    assert baseline["ci_original"].ok, baseline["ci_original"].stdout
    assert baseline["ci_gold"].ok, baseline["ci_gold"].stdout
    assert baseline["ci_gold"].applied == ["mathx/core.py"]


def test_correct_patch_beats_good_tests(issue: Issue, baseline: dict[str, RunResult]) -> None:
    sub, rev = ScriptedModel([patch_to(FIXED)]), ScriptedModel([review_reply(GOOD_TESTS)])
    rec = run_battle(
        issue,
        sub,
        rev,
        submitter_name="S",
        reviewer_name="R",
        config=CONFIG,
        baseline=baseline,
    )
    v = rec["verdict"]
    assert v["patch_valid"]
    assert v["tests_valid"]
    assert v["tests_discriminative"]  # they fail on the buggy original
    assert v["patch_passes_tests"] is True
    assert (v["winner"], v["submitter_score"], v["reviewer_score"]) == ("submitter", 1, 0)
    assert rec["runs"]["review_original"]["returncode"] == 1  # pytest: tests failed
    assert rec["id"] == "mathx-1|S|R|0"
    assert rec["events"] == []
    # the reviewer saw the submitter's patch; the submitter saw the buggy source
    assert "return hi" in rev.calls[0][1]["content"]
    assert "def clamp" in sub.calls[0][1]["content"]
    json.dumps(rec)  # a plain JSON record


def test_malicious_patch_in_a_battle_is_contained_and_reported(
    issue: Issue, baseline: dict[str, RunResult], tmp_path: pathlib.Path
) -> None:
    target = tmp_path / "stolen.txt"
    evil = FIXED + (
        "\n\nimport socket as _s\n"
        "try:\n"
        f"    open({str(target)!r}, 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        "    _s.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except OSError:\n"
        "    pass\n"
    )
    rec = run_battle(
        issue,
        ScriptedModel([patch_to(evil)]),
        ScriptedModel(["I have no tests."]),
        config=CONFIG,
        baseline=baseline,
    )
    assert not target.exists()  # the path does not even exist inside the sandbox
    kinds = {(e["run"], e["kind"], e["action"]) for e in rec["events"]}
    assert ("ci_generated", "network", "blocked") in kinds  # reported by the audit hook
    assert rec["isolation"] == "bubblewrap"
    assert rec["runs"]["ci_generated"]["isolation"] == "bubblewrap"
    v = rec["verdict"]
    assert v["tests_valid"] is False
    assert rec["tests"] == ""
    # the sandbox refused the actions; the patch itself still fixes the bug and keeps CI
    # green, and the reviewer offered no valid tests, so the submitter wins by forfeit
    assert (v["winner"], v["reviewer_score"]) == ("submitter", -1)


CHEAT_CONFTEST = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(tryfirst=True)\n"
    "def pytest_runtest_call(item):\n"
    "    item.runtest = lambda: None  # every test passes without running\n"
)


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("conftest.py", None, CHEAT_CONFTEST),
        ("tests/test_core.py", REPO_TESTS, REPO_TESTS.replace("== 0", "== 0 or True")),
        ("pytest.py", None, "raise SystemExit(0)\n"),  # shadows the test runner
    ],
)
def test_a_patch_touching_how_tests_run_loses(
    issue: Issue, baseline: dict[str, RunResult], path: str, old: str | None, new: str
) -> None:
    """A fix-nothing patch that only changes how the tests run is rejected, and loses."""
    if path == "tests/test_core.py":
        cheat = make_diff(path, old, new)
    else:
        cheat = make_diff(path, None, new)
    rec = run_battle(
        issue,
        ScriptedModel([_fence(cheat)]),
        ScriptedModel([review_reply(GOOD_TESTS)]),
        config=CONFIG,
        baseline=baseline,
    )
    v = rec["verdict"]
    gen = rec["runs"]["ci_generated"]
    assert gen["returncode"] is None  # never ran
    assert gen["patch_error"].startswith("protected: ")
    assert path in gen["patch_error"]
    assert rec["runs"]["review_generated"] is None
    assert (v["patch_valid"], v["winner"], v["submitter_score"]) == (False, "reviewer", -1)
    assert "protected" in v["reason"]


def test_without_the_rule_the_conftest_cheat_would_win(
    issue: Issue, baseline: dict[str, RunResult]
) -> None:
    """The cheat is real: applied by hand, the reviewer's failing tests pass under it,
    unless the review command ignores conftest files (as the default does)."""
    cheat = make_diff("conftest.py", None, CHEAT_CONFTEST)
    tests = make_diff("tests/test_issue.py", None, GOOD_TESTS)
    argv = ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_issue.py"]
    fooled = run_sandboxed(issue.repo, argv, patches=[cheat, tests], limits=LIMITS, env=issue.env)
    assert fooled.ok, fooled.stdout  # conftest made the failing tests pass
    honest = run_sandboxed(
        issue.repo,
        [*argv[:-1], "--noconftest", argv[-1]],
        patches=[cheat, tests],
        limits=LIMITS,
        env=issue.env,
    )
    assert not honest.ok  # the same tests fail on the unfixed code without it
    assert "--noconftest" in issue.review_command


def test_a_reviewer_may_write_test_files_only(issue: Issue, baseline: dict[str, RunResult]) -> None:
    sneaky = make_diff("mathx/core.py", BUGGY, FIXED) + make_diff(
        "tests/test_issue.py", None, GOOD_TESTS
    )
    rec = run_battle(
        issue,
        ScriptedModel([patch_to(FIXED)]),
        ScriptedModel([_fence(sneaky)]),
        config=CONFIG,
        baseline=baseline,
    )
    assert rec["runs"]["review_gold"]["patch_error"].startswith("protected: mathx/core.py")
    assert rec["verdict"]["tests_valid"] is False
    assert rec["verdict"]["winner"] == "submitter"


def test_protected_paths() -> None:
    for path in (
        "conftest.py",
        "pkg/conftest.py",
        "setup.cfg",
        "tox.ini",
        "pyproject.toml",
        "x/__pycache__/m.cpython-311.pyc",
        "site.pth",
        "tests/data.json",
        "pkg/test_mod.py",
        "pkg/mod_test.py",
        "usercustomize.py",
    ):
        assert protected_reason(path) is not None, path
    for path in ("mathx/core.py", "src/pkg/testing.py", "README.md", "pkg/contest.py"):
        assert protected_reason(path) is None, path
    with pytest.raises(PatchError, match="shadows 'json'"):
        check_submission(make_diff("json.py", None, "x = 1\n"), repo="/nonexistent-repo")
    renamed = "--- a/tests/test_core.py\n+++ b/mathx/moved.py\n@@ -1 +1 @@\n-a\n+a\n"
    with pytest.raises(PatchError, match="protected"):
        check_submission(renamed)
    check_review(make_diff("tests/test_new.py", None, "def test_x():\n    pass\n"))
    with pytest.raises(PatchError, match="only write test files"):
        check_review(make_diff("tests/conftest.py", None, "x = 1\n"))


def test_no_isolation_refuses_before_asking_the_models(
    issue: Issue, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setattr(sandbox, "_probe", lambda: (None, "bubblewrap (bwrap) is not installed"))
    sub, rev = ScriptedModel([patch_to(FIXED)]), ScriptedModel([review_reply(GOOD_TESTS)])
    with pytest.raises(IsolationUnavailable, match="install bubblewrap"):
        run_battle(issue, sub, rev, config=CONFIG)
    with pytest.raises(IsolationUnavailable):
        run_arena([issue], {"m": sub}, tmp_path / "b.jsonl", config=CONFIG, progress=False)
    assert sub.calls == []
    assert rev.calls == []
    unsafe = BattleConfig(limits=LIMITS, unsafe_no_isolation=True)
    with pytest.warns(UserWarning, match="WITHOUT isolation"):
        rec = run_battle(issue, sub, rev, config=unsafe)
    assert rec["isolation"] == "unsafe-no-isolation"
    assert rec["runs"]["ci_generated"]["isolation"] == "unsafe-no-isolation"
    assert rec["verdict"]["winner"] == "submitter"


def _run(ok: bool | None, patch_error: str | None = None) -> RunResult | None:
    if ok is None:
        return None
    return RunResult(returncode=0 if ok else 1, patch_error=patch_error)


@pytest.mark.parametrize(
    ("gen", "gold_ci", "rev_gold", "rev_orig", "rev_gen", "winner", "scores"),
    [
        (True, True, True, False, True, "submitter", (1, 0)),
        (True, True, True, False, False, "reviewer", (0, 1)),
        (True, True, False, False, None, "submitter", (1, -1)),  # invalid tests
        (False, True, True, False, None, "reviewer", (-1, 1)),  # CI regression
        (False, True, False, True, None, "draw", (-1, -1)),
        (False, False, True, False, False, "reviewer", (0, 1)),  # CI red with gold too
        ("unapplied", True, True, False, None, "reviewer", (-1, 1)),
    ],
)
def test_verdict_rules(gen, gold_ci, rev_gold, rev_orig, rev_gen, winner, scores) -> None:
    runs = {
        "ci_original": _run(True),
        "ci_gold": _run(gold_ci),
        "ci_generated": (
            RunResult(returncode=None, patch_error="mismatch: x")
            if gen == "unapplied"
            else _run(gen)
        ),
        "review_gold": _run(rev_gold),
        "review_original": _run(rev_orig),
        "review_generated": _run(rev_gen),
    }
    v = judge(runs)
    assert v.winner == winner
    assert (v.submitter_score, v.reviewer_score) == scores
    assert v.tests_discriminative == (bool(rev_gold) and not rev_orig)


def test_verdict_killed_run_is_not_a_pass() -> None:
    from lc_evals.arena import ContainmentEvent

    killed = RunResult(returncode=0, events=[ContainmentEvent("wall_timeout", "killed", "")])
    assert not killed.ok
    runs = {"ci_gold": _run(True), "ci_generated": killed, "review_gold": _run(True)}
    assert judge(runs).patch_valid is False


def _role_model(patch_reply: str, tests: str) -> ScriptedModel:
    def reply(messages) -> str:
        return tests if messages[0]["content"] == REVIEWER_SYSTEM else patch_reply

    return ScriptedModel(reply)


def test_arena_persists_ranks_and_resumes(
    issue: Issue, baseline: dict[str, RunResult], tmp_path: pathlib.Path
) -> None:
    strong = _role_model(patch_to(FIXED), review_reply(GOOD_TESTS))
    weak = _role_model(patch_to(WRONG), review_reply(BAD_TESTS))
    store = tmp_path / "arena" / "battles.jsonl"
    models = {"strong": strong, "weak": weak}
    base = {issue.id: baseline}
    table = run_arena([issue], models, store, config=CONFIG, progress=False, baselines=base)
    records = ArenaStore(store).records()
    assert sorted(r["id"] for r in records) == ["mathx-1|strong|weak|0", "mathx-1|weak|strong|0"]
    by = {s.model: s for s in table}
    assert table[0].model == "strong"
    assert by["strong"].elo > 1000 > by["weak"].elo
    assert by["strong"].elo + by["weak"].elo == pytest.approx(2000)
    assert (by["strong"].submitter_wins, by["strong"].reviewer_wins) == (1, 1)
    assert by["weak"].valid_tests == 0
    weak_sub = next(r for r in records if r["submitter"] == "weak")
    assert weak_sub["verdict"]["patch_valid"]  # the repository's own tests still pass ...
    assert weak_sub["runs"]["ci_generated"]["ok"]
    assert weak_sub["verdict"]["patch_passes_tests"] is False  # ... the reviewer's do not
    assert weak_sub["verdict"]["winner"] == "reviewer"
    weak_rev = next(r for r in records if r["reviewer"] == "weak")
    assert weak_rev["verdict"]["tests_valid"] is False  # its tests fail on the gold patch
    assert weak_rev["runs"]["review_generated"] is None
    assert {r["isolation"] for r in records} == {"bubblewrap"}
    calls = len(strong.calls) + len(weak.calls)
    # a crash in the middle of a write leaves a partial last line: ignored on resume
    with open(store, "a") as f:
        f.write('{"id": "mathx-1|str')
    again = run_arena([issue], models, store, config=CONFIG, progress=False, baselines=base)
    assert len(strong.calls) + len(weak.calls) == calls  # nothing replayed
    assert [s.to_dict() for s in again] == [s.to_dict() for s in table]
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(issue.to_dict()))
    assert load_issue(issue_file) == issue


def test_elo_is_zero_sum_and_symmetric() -> None:
    for a, b in itertools.product([800.0, 1000.0, 1234.5], repeat=2):
        assert expected_score(a, b) + expected_score(b, a) == pytest.approx(1.0)
    verdict = {"winner": "draw", "submitter_score": 0, "reviewer_score": 0}
    verdict |= {"patch_valid": True, "tests_valid": True, "tests_discriminative": True}
    recs = [
        {"id": f"i|a|b|{r}", "submitter": "a", "reviewer": "b", "verdict": verdict}
        for r in range(3)
    ]
    table = leaderboard(recs)
    assert [s.elo for s in table] == [1000.0, 1000.0]  # draws between equals change nothing


def test_whole_file_context_and_bare_code_reviews(issue: Issue) -> None:
    snippets = whole_file_context(issue.repo)("anything")
    assert [s.splitlines()[0] for s in snippets] == [
        "### mathx/__init__.py",
        "### mathx/core.py",
        "### tests/test_core.py",
    ]
    diff = read_review(f"```python\n{GOOD_TESTS}```", "tests/test_review.py")
    assert diff.startswith("--- /dev/null\n+++ b/tests/test_review.py\n")
    assert read_review("no code at all", "tests/t.py") == ""


def test_issue_validates() -> None:
    gold = make_diff("m.py", "a\n", "b\n")
    with pytest.raises(ValueError, match="description"):
        Issue("x", "/tmp", "  ", gold)
    with pytest.raises(ValueError, match="tests"):
        Issue("x", "/tmp", "d", gold, review_command=("pytest",))
    with pytest.raises(ValueError, match="empty"):
        Issue("x", "/tmp", "d", "not a diff")


GUIDE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "packages" / "lc-evals-arena.md"


@pytest.mark.skipif(not GUIDE.exists(), reason="the docs tree is not beside this checkout")
def test_guide_example_prints_what_the_guide_says(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    text = GUIDE.read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    expected = re.findall(r"```text\n(.*?)```", text, re.S)[0]
    exec(compile(code, str(GUIDE), "exec"), {})
    assert capsys.readouterr().out == expected

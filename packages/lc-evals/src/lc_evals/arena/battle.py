"""One battle: a submitter patches an issue, a reviewer writes tests, the CI judges.

Runs (each on a fresh sandboxed copy of the repository):

| run | patches applied | command |
|---|---|---|
| `ci_original` | none | `issue.test_command` |
| `ci_gold` | gold | `issue.test_command` |
| `ci_generated` | submitter's | `issue.test_command` |
| `review_gold` | gold + reviewer's tests | `issue.review_command` |
| `review_original` | reviewer's tests | `issue.review_command` |
| `review_generated` | submitter's + reviewer's tests | `issue.review_command` |

Verdicts (following SwingArena's rules; see :func:`judge`):

* the **patch is valid** when it applies and no check that passes with the gold patch
  fails with it (the paper's original/gold/generated ``FPF`` and ``PPF`` patterns fail);
* the **tests are valid** when they apply and pass with the gold patch (they agree with
  the reference fix), and **discriminative** when they also fail on the original code;
* both valid: the submitter wins if its patch passes the reviewer's tests, else the
  reviewer wins. Only one valid: that side wins. Neither: a draw.
* scores: ``+1`` to the winner, ``-1`` to a side whose output is invalid, else ``0``.

Integrity: the submitter's patch may change source only. A patch that adds, changes or
deletes a test file, ``conftest.py``, test or build configuration (``pytest.ini``,
``tox.ini``, ``setup.cfg``, ``setup.py``, ``pyproject.toml`` ...), ``sitecustomize``,
a ``.pth`` file, bytecode, a file of the test commands, or a new top-level module that
shadows an installed one is rejected before any run (``ci_generated.patch_error``
starts with ``"protected:"``), and so is invalid. The reviewer's diff may write test
files only. The review runs therefore execute the reviewer's own test tree (the
original repository's plus the reviewer's files) against the patched source, and the
default review command adds ``--noconftest``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lc_evals.arena.issue import Issue
from lc_evals.arena.patch import (
    PatchError,
    check_path,
    check_review,
    check_submission,
    parse_patch,
)
from lc_evals.arena.prompts import (
    Retriever,
    read_review,
    read_submission,
    render_context,
    reviewer_messages,
    submitter_messages,
    whole_file_context,
)
from lc_evals.arena.sandbox import RunResult, SandboxLimits, require_isolation, run_sandboxed
from lc_evals.types import ChatModel


@dataclass(frozen=True)
class BattleConfig:
    """Settings of a battle.

    Attributes:
        limits: sandbox limits of every run.
        max_context_chars: budget of retrieved code in each prompt.
        submitter_tokens: ``max_tokens`` of the submitter's reply.
        reviewer_tokens: ``max_tokens`` of the reviewer's reply.
        temperature: sampling temperature of both models (0 = greedy).
        workers: sandboxed runs executed at the same time (the three runs after the
            models replied are independent).
        unsafe_no_isolation: run the code without bubblewrap where it is unavailable
            (recorded in every run and in the battle record as
            ``"unsafe-no-isolation"``). Never for untrusted models on a machine that
            matters.
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    max_context_chars: int = 12000
    submitter_tokens: int = 768
    reviewer_tokens: int = 768
    temperature: float = 0.0
    workers: int = 3
    unsafe_no_isolation: bool = False

    def __post_init__(self) -> None:
        for name in ("max_context_chars", "submitter_tokens", "reviewer_tokens", "workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"BattleConfig.{name} must be a positive int, got {value!r}")
        if self.temperature < 0:
            raise ValueError(f"BattleConfig.temperature must be >= 0, got {self.temperature!r}")


@dataclass(frozen=True)
class Verdict:
    """What the runs say. ``winner`` is ``"submitter"``, ``"reviewer"`` or ``"draw"``."""

    patch_applied: bool
    patch_valid: bool
    tests_applied: bool
    tests_valid: bool
    tests_discriminative: bool
    patch_passes_tests: bool | None
    winner: str
    submitter_score: int
    reviewer_score: int
    reason: str


def _test_files(diff: str) -> list[str]:
    try:
        return [fp.new_path for fp in parse_patch(diff) if fp.new_path]
    except PatchError:
        return []


def _review_argv(issue: Issue, diff: str) -> list[str]:
    files = _test_files(diff) or [issue.review_test_path]
    argv: list[str] = []
    for part in issue.review_command:
        argv.extend(files if part == "{tests}" else [part])
    return argv


def judge(runs: Mapping[str, RunResult | None]) -> Verdict:
    """The verdict of a battle from its six runs (see the module doc for the rules).

    ``runs`` maps the run names of the module table to results; a run that was not
    needed (for example ``review_generated`` when the patch did not apply) is ``None``.
    """

    def ok(name: str) -> bool:
        r = runs.get(name)
        return r is not None and r.ok

    gen = runs.get("ci_generated")
    patch_applied = gen is not None and gen.patch_error is None and gen.returncode is not None
    gold_passes = ok("ci_gold")
    patch_valid = patch_applied and (ok("ci_generated") or not gold_passes)
    rg = runs.get("review_gold")
    tests_applied = rg is not None and rg.patch_error is None and rg.returncode is not None
    tests_valid = tests_applied and ok("review_gold")
    discriminative = tests_valid and not ok("review_original")
    rgen = runs.get("review_generated")
    passes: bool | None = None
    if patch_valid and tests_valid and rgen is not None and rgen.patch_error is None:
        passes = rgen.ok
    if patch_valid and tests_valid:
        if passes is None:
            winner, reason = "draw", "the tests do not apply on top of the patch"
        elif passes:
            winner, reason = "submitter", "the patch passes CI and the reviewer's tests"
        else:
            winner, reason = "reviewer", "the reviewer's tests fail the patch"
    elif patch_valid:
        winner, reason = "submitter", "the reviewer's tests are invalid (fail on the gold patch)"
    elif tests_valid:
        why = gen.patch_error if gen is not None and gen.patch_error else None
        winner, reason = (
            "reviewer",
            (
                f"the patch is invalid ({why})"
                if why
                else "the patch is invalid (does not apply or breaks CI)"
            ),
        )
    else:
        winner, reason = "draw", "neither the patch nor the tests are valid"
    sub = 1 if winner == "submitter" else (-1 if not patch_valid else 0)
    rev = 1 if winner == "reviewer" else (-1 if not tests_valid else 0)
    return Verdict(
        patch_applied=patch_applied,
        patch_valid=patch_valid,
        tests_applied=tests_applied,
        tests_valid=tests_valid,
        tests_discriminative=discriminative,
        patch_passes_tests=passes,
        winner=winner,
        submitter_score=sub,
        reviewer_score=rev,
        reason=reason,
    )


def _command_files(issue: Issue) -> set[str]:
    """Repository files named in the test commands (a script the check runs)."""
    root = Path(issue.repo)
    names = set()
    for part in (*issue.test_command, *issue.review_command):
        if part.startswith(("{", "-", "/")):
            continue
        try:
            rel = check_path(part)
        except PatchError:
            continue
        if (root / rel).is_file():
            names.add(rel)
    return names


def _refuse_submission(issue: Issue, patch: str) -> str | None:
    """``"protected: <reason>"`` when the submitter's patch touches what judges it."""
    try:
        check_submission(patch, repo=issue.repo, extra=_command_files(issue))
    except PatchError as exc:
        return str(exc) if exc.kind == "protected" else None
    return None


def _refuse_review(tests: str) -> str | None:
    try:
        check_review(tests)
    except PatchError as exc:
        return str(exc) if exc.kind == "protected" else None
    return None


def battle_id(issue: Issue, submitter: str, reviewer: str, round_index: int = 0) -> str:
    """Stable id of a battle: ``"<issue>|<submitter>|<reviewer>|<round>"``."""
    return f"{issue.id}|{submitter}|{reviewer}|{round_index}"


def baseline_runs(
    issue: Issue, limits: SandboxLimits, *, unsafe_no_isolation: bool = False
) -> dict[str, RunResult]:
    """The repository's check on the original code and with the gold patch."""
    if not unsafe_no_isolation:
        require_isolation()
    with ThreadPoolExecutor(max_workers=2) as pool:
        original = pool.submit(
            run_sandboxed,
            issue.repo,
            issue.test_command,
            limits=limits,
            env=issue.env,
            unsafe_no_isolation=unsafe_no_isolation,
        )
        gold = pool.submit(
            run_sandboxed,
            issue.repo,
            issue.test_command,
            patches=[issue.gold_patch],
            limits=limits,
            env=issue.env,
            unsafe_no_isolation=unsafe_no_isolation,
        )
        return {"ci_original": original.result(), "ci_gold": gold.result()}


def run_battle(
    issue: Issue,
    submitter: ChatModel,
    reviewer: ChatModel,
    *,
    submitter_name: str = "submitter",
    reviewer_name: str = "reviewer",
    retriever: Retriever | None = None,
    config: BattleConfig | None = None,
    baseline: Mapping[str, RunResult] | None = None,
    round_index: int = 0,
    on_stage: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play one battle and return its JSON record.

    Args:
        issue: the task.
        submitter: chat model that writes the patch.
        reviewer: chat model that writes the tests (it sees the submitter's patch).
        submitter_name: the submitter's name in the record and on the leaderboard.
        reviewer_name: the reviewer's name in the record and on the leaderboard.
        retriever: ``query -> snippets`` for the prompts (default: whole small files).
        config: battle settings.
        baseline: ``ci_original``/``ci_gold`` runs already made for this issue.
        round_index: for repeated battles of the same pairing.
        on_stage: called with a short stage name as the battle progresses.

    Returns:
        ``{"id", "issue", "submitter", "reviewer", "round", "patch", "tests",
        "replies", "runs", "verdict", "events", "isolation", "seconds"}``; ``runs`` maps
        run names to :meth:`RunResult.to_dict`, ``events`` lists every containment event
        with its run, ``isolation`` is ``"bubblewrap"`` or ``"unsafe-no-isolation"``.

    Raises:
        IsolationUnavailable: bubblewrap cannot run here and the config does not allow
            running without isolation (raised before the models are asked).
    """
    cfg = config or BattleConfig()
    if not cfg.unsafe_no_isolation:
        require_isolation()
    say = on_stage or (lambda stage: None)
    start = time.monotonic()
    retrieve = retriever or whole_file_context(issue.repo)
    context = render_context(list(retrieve(issue.description)), cfg.max_context_chars)
    say("submitter")
    sub_reply = submitter.chat(
        submitter_messages(issue.description, context),
        max_tokens=cfg.submitter_tokens,
        temperature=cfg.temperature,
    )
    patch = read_submission(sub_reply)
    say("reviewer")
    rev_reply = reviewer.chat(
        reviewer_messages(issue.description, context, patch),
        max_tokens=cfg.reviewer_tokens,
        temperature=cfg.temperature,
    )
    tests = read_review(rev_reply, issue.review_test_path)
    say("ci")
    unsafe = cfg.unsafe_no_isolation
    runs: dict[str, RunResult | None] = dict(
        baseline or baseline_runs(issue, cfg.limits, unsafe_no_isolation=unsafe)
    )
    lim = cfg.limits

    def sandboxed(argv: Sequence[str], patches: list[str]) -> RunResult:
        return run_sandboxed(
            issue.repo,
            argv,
            patches=patches,
            limits=lim,
            env=issue.env,
            unsafe_no_isolation=unsafe,
        )

    jobs: dict[str, tuple[Sequence[str], list[str]]] = {}
    patch_refusal = _refuse_submission(issue, patch) if patch else None
    tests_refusal = _refuse_review(tests) if tests else None
    if patch and patch_refusal is None:
        jobs["ci_generated"] = (issue.test_command, [patch])
    else:
        runs["ci_generated"] = RunResult(
            returncode=None, patch_error=patch_refusal or "empty: the reply holds no diff"
        )
    if tests and tests_refusal is not None:
        runs["review_gold"] = RunResult(returncode=None, patch_error=tests_refusal)
        runs["review_original"] = None
    elif tests:
        argv = _review_argv(issue, tests)
        jobs["review_gold"] = (argv, [issue.gold_patch, tests])
        jobs["review_original"] = (argv, [tests])
    else:
        runs["review_gold"] = RunResult(
            returncode=None, patch_error="empty: the reply holds no tests"
        )
        runs["review_original"] = None
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        futures = {name: pool.submit(sandboxed, *job) for name, job in jobs.items()}
        runs.update({name: f.result() for name, f in futures.items()})
    pre = judge(runs)
    runs["review_generated"] = (
        sandboxed(_review_argv(issue, tests), [patch, tests])
        if pre.patch_valid and pre.tests_valid
        else None
    )
    verdict = judge(runs)
    events = [
        {"run": name, "kind": e.kind, "action": e.action, "detail": e.detail}
        for name, r in runs.items()
        if r is not None
        for e in r.events
    ]
    return {
        "id": battle_id(issue, submitter_name, reviewer_name, round_index),
        "issue": issue.id,
        "submitter": submitter_name,
        "reviewer": reviewer_name,
        "round": round_index,
        "patch": patch,
        "tests": tests,
        "replies": {"submitter": sub_reply, "reviewer": rev_reply},
        "runs": {k: (v.to_dict() if v is not None else None) for k, v in runs.items()},
        "verdict": verdict.__dict__,
        "events": events,
        "isolation": "unsafe-no-isolation" if unsafe else "bubblewrap",
        "seconds": round(time.monotonic() - start, 3),
    }

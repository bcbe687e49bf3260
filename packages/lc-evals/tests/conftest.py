"""Fixtures of the lc-evals tests: a real subword tokenizer trained offline."""

from __future__ import annotations

import os
import random

import pytest

# Under `uv run` (the test command, or `uv run nox` in CI) Ray starts its workers with
# `uv run` in an uploaded copy of the working directory, which builds an environment of
# its own there: slow enough on a loaded machine that workers fail to register, and not
# the environment under test. The local Ray instance of the tests uses this interpreter.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


class TrainedTokenizer:
    """A byte-pair-encoding tokenizer trained in the test session (nothing downloaded)."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        from lc_evals.haystack import REPEAT_BLOCK, essay_sentences

        rng = random.Random(0)
        sentences = essay_sentences(rng)
        corpus = [" ".join(next(sentences) for _ in range(20)) for _ in range(200)]
        corpus += list(REPEAT_BLOCK) * 5
        corpus += [
            f"One of the special magic numbers for key-{i} is: {rng.randint(10**6, 10**7)}."
            for i in range(200)
        ]
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train_from_iterator(
            corpus,
            trainers.BpeTrainer(vocab_size=600, special_tokens=["[UNK]"], show_progress=False),
        )
        self.inner = tok

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="session")
def tokenizer() -> TrainedTokenizer:
    """A small BPE tokenizer (vocabulary 600) trained on generated essay text."""
    return TrainedTokenizer()


def check_seeded_items(task: str, length: int) -> list:
    """Two items of ``task`` at ``length`` (seed 11): the same arguments give the same
    items, item 0 does not depend on ``n``, another seed gives another item 0, and the
    ids are ``task-seed-index``. Returns the items."""
    import lc_evals

    a = lc_evals.generate(task, n=2, length=length, seed=11)
    assert a == lc_evals.generate(task, n=2, length=length, seed=11)
    assert a[:1] == lc_evals.generate(task, n=1, length=length, seed=11)
    assert a[0] != lc_evals.generate(task, n=1, length=length, seed=12)[0]
    assert [i.id for i in a] == [f"{task}-11-0", f"{task}-11-1"]
    return a


@pytest.fixture(scope="session")
def seeded_items():
    """:func:`check_seeded_items`, for the determinism tests of every generator."""
    return check_seeded_items

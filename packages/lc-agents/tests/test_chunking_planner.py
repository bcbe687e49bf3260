"""The noise-model planner: recovers known parameters and advises against useless chunking."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from lc_agents.chunking import (
    NoiseModel,
    PilotResult,
    fit_noise_model,
    recommend_chunking,
    run_pilot,
)

SIZES = (4000, 2000, 1000, 500, 250, 125)


def exact_pilots(model: NoiseModel, doc_length: int = 4000, n: int = 10**6) -> list[PilotResult]:
    """Pilot counts equal to the model's expected counts (no sampling noise)."""
    return [
        PilotResult(
            c,
            doc_length,
            round(n * float(model.accuracy(doc_length, math.ceil(doc_length / c)))),
            n,
        )
        for c in SIZES
    ]


def sampled_pilots(model: NoiseModel, rng: np.random.Generator, n: int) -> list[PilotResult]:
    out = []
    for length in (2000, 4000):
        for c in SIZES:
            k = max(1, math.ceil(length / c))
            out.append(
                PilotResult(c, length, int(rng.binomial(n, float(model.accuracy(length, k)))), n)
            )
    return out


@pytest.mark.parametrize(
    "true",
    [
        NoiseModel(0.4, 2.0, 0.03, base_noise=0.05, length_scale=1000),
        NoiseModel(0.1, 3.0, 0.01, base_noise=0.0, length_scale=1000),
        NoiseModel(1.2, 1.5, 0.08, base_noise=0.2, length_scale=1000),
    ],
)
def test_fit_recovers_known_parameters(true: NoiseModel) -> None:
    fit = fit_noise_model(exact_pilots(true), length_scale=1000).model
    assert fit.growth == pytest.approx(true.growth, abs=0.01)
    assert fit.model_noise == pytest.approx(true.model_noise, rel=0.03)
    assert fit.aggregator_noise == pytest.approx(true.aggregator_noise, rel=0.03, abs=1e-3)
    assert fit.base_noise == pytest.approx(true.base_noise, abs=0.01)


def test_fit_from_sampled_pilots_recommends_the_true_optimum() -> None:
    true = NoiseModel(0.4, 2.0, 0.03, base_noise=0.05, length_scale=1000)
    fit = fit_noise_model(sampled_pilots(true, np.random.default_rng(0), n=400), length_scale=1000)
    assert fit.model.growth == pytest.approx(2.0, abs=0.3)
    assert fit.n_points == 12
    assert len(fit.profile) == len(fit.growth_grid)
    assert fit.log_likelihood >= -min(fit.profile) - 1e-9  # refinement never loses to the grid
    want = recommend_chunking(true, 8000, chunk_sizes=SIZES)
    got = recommend_chunking(fit.model, 8000, chunk_sizes=SIZES)
    assert got.chunk
    assert got.chunk_size == want.chunk_size


@pytest.mark.parametrize("growth", [0.0, 0.5, 1.0])
def test_no_chunking_when_noise_does_not_grow_superlinearly(growth: float) -> None:
    true = NoiseModel(0.3, growth, 0.02, base_noise=0.1, length_scale=1000)
    rec = recommend_chunking(true, 4000)
    assert not rec.chunk
    assert rec.n_workers == 1
    assert rec.chunk_size == 4000
    assert rec.predicted_accuracy == rec.single_pass_accuracy
    # ... and the same advice from a model fitted to pilots generated with it
    fitted = fit_noise_model(exact_pilots(true), length_scale=1000).model
    assert fitted.growth <= 1.0 + 0.02
    assert not recommend_chunking(fitted, 4000, chunk_sizes=SIZES).chunk


def test_constant_accuracy_fits_no_length_effect() -> None:
    # accuracy 80% at every chunk size: nothing grows with length, chunking only adds noise
    pilots = [PilotResult(c, 4000, 800, 1000) for c in SIZES]
    fit = fit_noise_model(pilots)
    rec = recommend_chunking(fit.model, 4000, chunk_sizes=SIZES)
    assert not rec.chunk
    assert float(fit.model.accuracy(4000, 1)) == pytest.approx(0.8, abs=0.01)


def test_recommendation_matches_the_closed_form_optimum() -> None:
    model = NoiseModel(0.5, 2.5, 0.04, base_noise=0.0, length_scale=1000)
    l_star = 1000 * (0.04 / (0.5 * 1.5)) ** (1 / 2.5)
    assert model.optimal_chunk_length == pytest.approx(l_star)
    for length in (20_000, 60_000):  # the best chunk length does not depend on L
        rec = recommend_chunking(model, length)
        assert rec.chunk
        assert rec.chunk_size == pytest.approx(l_star, rel=0.02)
        best = max(rec.curve, key=lambda row: row[2])
        assert best[0] == rec.n_workers


def test_more_workers_always_help_without_aggregator_noise() -> None:
    model = NoiseModel(0.5, 2.0, 0.0, length_scale=1000)
    rec = recommend_chunking(model, 1000, max_workers=50)
    assert rec.n_workers == 50
    assert model.optimal_chunk_length == 0.0


def test_documents_beyond_the_window_must_be_chunked() -> None:
    model = NoiseModel(0.1, 1.0, 0.05, length_scale=1000)  # linear noise: chunking never helps
    rec = recommend_chunking(model, 10_000, max_chunk_size=4000)
    assert rec.chunk
    assert rec.single_pass_accuracy is None
    assert rec.n_workers == 3
    assert rec.chunk_size <= 4000
    with pytest.raises(ValueError, match="max_chunk_size"):
        recommend_chunking(model, 10_000, chunk_sizes=[8000], max_chunk_size=4000)


def test_min_gain_keeps_the_single_pass() -> None:
    model = NoiseModel(0.05, 2.0, 0.01, length_scale=1000)
    rec = recommend_chunking(model, 1500)
    assert rec.chunk
    gain = rec.predicted_accuracy - float(model.accuracy(1500, 1))
    assert not recommend_chunking(model, 1500, min_gain=gain + 1e-6).chunk


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chunk_size": 0, "doc_length": 10, "correct": 1, "total": 2}, "chunk_size=0"),
        ({"chunk_size": 5, "doc_length": 0, "correct": 1, "total": 2}, "doc_length=0"),
        ({"chunk_size": 5, "doc_length": 10, "correct": 3, "total": 2}, "correct=3"),
        ({"chunk_size": 5, "doc_length": 10, "correct": 0, "total": 0}, "total=0"),
    ],
)
def test_pilot_validation(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        PilotResult(**kwargs)


def test_model_and_fit_validation() -> None:
    with pytest.raises(ValueError, match="growth"):
        NoiseModel(0.1, -1.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        fit_noise_model([])
    with pytest.raises(ValueError, match="growth_bounds"):
        fit_noise_model(exact_pilots(NoiseModel(0.1, 2, 0.01)), growth_bounds=(2.0, 1.0))
    with pytest.raises(ValueError, match="doc_length"):
        recommend_chunking(NoiseModel(0.1, 2, 0.01), 0)


class LengthLimitedFinder:
    """Finds key=<digits> only in chunks of at most 100 characters, else answers wrongly."""

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        text = messages[0]["content"]
        part = text.split("<part>\n", 1)[1].split("\n</part>", 1)[0]
        if "key=" not in part:
            return "none"
        if len(part) > 100:
            return "12345"
        return part.split("key=", 1)[1].split()[0]


def test_run_pilot_measures_accuracy_per_chunk_size() -> None:
    from lc_evals import TaskItem

    items = [
        TaskItem(
            f"kv-{i}",
            "kv",
            "." * (37 * i) + f" key={1000 + i} " + "." * (300 - 37 * i),
            "key?",
            (str(1000 + i),),
        )
        for i in range(5)
    ]
    summaries, records = run_pilot(
        LengthLimitedFinder(), items, [400, 100, 50], config=base_config()
    )
    assert [s.chunk_size for s in summaries] == [400, 100, 50]
    assert next(s.accuracy for s in summaries) == 0.0  # one pass of ~310 chars: always wrong
    assert summaries[1].accuracy == 1.0
    assert summaries[2].accuracy == 1.0
    assert summaries[1].workers == 4
    assert len(records) == 15
    assert all(r.doc_length == len(items[0].context) for r in records)


def base_config() -> Any:
    from lc_agents.chunking import ChunkingConfig

    return ChunkingConfig(chunk_size=100, overlap=12, aggregation="vote")

"""aeon baselines on prefixes, and the paired tests that compare methods."""

from __future__ import annotations

import numpy as np
import pytest

from lc_timeseries_kd.baselines import BASELINES, fit_predict_baseline
from lc_timeseries_kd.experiment import paired_tests


def _blobs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(60) % 3
    x = rng.normal(size=(60, 2, 40))
    for c in range(3):  # each class has a bump at its own place
        x[y == c, c % 2, 5 + 10 * c : 12 + 10 * c] += 3.0
    return x, y


@pytest.mark.parametrize("name", BASELINES)
def test_aeon_baselines_fit_and_give_probabilities(name: str) -> None:
    # fails where aeon's numba code cannot compile against the installed numpy
    x, y = _blobs()
    proba = fit_predict_baseline(name, x[:45], y[:45], x[45:], n_classes=4, seed=0)
    assert proba.shape == (15, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    assert np.all(proba[:, 3] == 0.0)  # a class never seen in training gets no mass
    assert np.mean(proba.argmax(axis=1) == y[45:]) >= 0.8


def test_baseline_input_is_checked() -> None:
    x, y = _blobs()
    with pytest.raises(ValueError, match="unknown baseline"):
        fit_predict_baseline("rocket9000", x, y, x, 3, seed=0)
    with pytest.raises(ValueError, match="equal channels"):
        fit_predict_baseline("quant", x, y, x[:, :1], 3, seed=0)


def _cells(diffs: dict[str, list[float]]) -> list[dict]:
    cells = []
    for i in range(len(next(iter(diffs.values())))):
        methods = {"gdpd": {"auc_prc": 0.8}}
        for m, d in diffs.items():
            methods[m] = {"auc_prc": 0.8 - d[i] / 100}
        cells.append({"dataset": f"d{i % 3}", "seed": i // 3, "earliness": 0.4, "methods": methods})
    return cells


def test_paired_tests_against_scipy_and_holm() -> None:
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(0)
    lead = list(rng.normal(3.0, 1.0, size=12))  # GDPD clearly ahead
    noise = list(rng.normal(0.0, 1.0, size=12))
    res = paired_tests(_cells({"none": lead, "fitnet": noise}))
    r = res["0.4"]["none"]
    assert r["n"] == 12
    assert r["wins"] == sum(d > 0 for d in lead)
    assert r["p"] == pytest.approx(wilcoxon(np.array(lead)).pvalue, rel=1e-6)
    assert r["mean_diff"] == pytest.approx(np.mean(lead), abs=1e-9)
    f = res["0.4"]["fitnet"]
    assert f["p"] == pytest.approx(wilcoxon(np.array(noise)).pvalue, rel=1e-6)
    # Holm over the two comparisons: smallest p times 2, then the running maximum
    p_small, p_big = sorted([r["p"], f["p"]])
    holm = sorted([r["p_holm"], f["p_holm"]])
    assert holm[0] == pytest.approx(min(1.0, 2 * p_small))
    assert holm[1] == pytest.approx(max(holm[0], min(1.0, p_big)))
    assert res["all"]["none"]["n"] == 12
    ties = paired_tests(_cells({"none": [0.0] * 5}))["0.4"]["none"]
    assert ties["p"] is None
    assert ties["ties"] == 5
    with pytest.raises(ValueError, match="reference"):
        paired_tests(_cells({"none": lead}), reference="logit")


def test_grid_cells_score_baselines_on_the_same_test_prefixes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lc_timeseries_kd.config import TrainConfig
    from lc_timeseries_kd.experiment import results_table, run_grid

    cfg = TrainConfig(arch="fcn", widths=(4, 8, 4), length=24, epochs=2, warmup_epochs=1)
    (cell,) = run_grid(
        ["ItalyPowerDemand"], [0.5], [0], ["none"], cfg, tmp_path, False, baselines=["quant"]
    )
    assert set(cell["methods"]) == {"none", "quant"}
    assert 0.5 < cell["methods"]["quant"]["auc_prc"] <= 1.0
    assert "| none | quant |" in results_table([cell])
    with pytest.raises(TypeError, match="sequence of names"):
        run_grid(
            ["ItalyPowerDemand"], [0.5], [0], ["none"], cfg, tmp_path, False, baselines="quant"
        )

"""Training loops, determinism, the estimator, the grid runner and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from typer.testing import CliRunner

from lc_timeseries_kd.cli import app
from lc_timeseries_kd.config import GDPDConfig, TrainConfig
from lc_timeseries_kd.data import prefix_view
from lc_timeseries_kd.estimator import PartialSeriesClassifier
from lc_timeseries_kd.experiment import (
    aggregate,
    load_results,
    results_table,
    run_grid,
    select_by_validation,
)
from lc_timeseries_kd.metrics import accuracy
from lc_timeseries_kd.training import predict_proba, train_student, train_teacher

TINY = TrainConfig(
    arch="fcn",
    widths=(8, 16, 8),
    epochs=8,
    warmup_epochs=3,
    batch_size=8,
    lr=3e-3,
    gdpd=GDPDConfig(hidden=32),
)


def _student(method: str, toy, seed: int = 0):
    x, y = toy
    teacher = train_teacher(x, y, x, y, TINY, seed=0).model
    xp = prefix_view(x, 0.5)
    return train_student(method, xp, x, y, xp, y, teacher, TINY, seed=seed)


def test_teacher_learns_the_toy_task(toy) -> None:
    x, y = toy
    res = train_teacher(x, y, x, y, TINY, seed=0)
    assert accuracy(y, predict_proba(res.model, x)) >= 0.9
    assert len(res.val_loss) == TINY.epochs
    assert 1 <= res.best_epoch <= TINY.epochs


@pytest.mark.parametrize("method", ["none", "logit", "fitnet", "gdpd"])
def test_every_method_trains_a_student_that_runs_alone(toy, method: str) -> None:
    res = _student(method, toy)
    x, y = toy
    proba = predict_proba(res.model, prefix_view(x, 0.5))
    assert proba.shape == (len(y), 2)
    assert np.isfinite(res.train_loss).all()
    assert res.best_epoch > TINY.warmup_epochs  # every method selects after the warm-up
    assert accuracy(y, proba) >= 0.75


@pytest.mark.parametrize("method", ["none", "gdpd"])
def test_training_is_deterministic_with_a_seed(toy, method: str) -> None:
    a, b = _student(method, toy, seed=5), _student(method, toy, seed=5)
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert ka == kb
        assert torch.equal(va, vb)
    assert a.train_loss == b.train_loss
    c = _student(method, toy, seed=6)
    assert c.train_loss != a.train_loss


@pytest.mark.parametrize(
    ("method", "changes"),
    [
        ("logit", {"kd_weight": 0.0}),
        ("fitnet", {"warmup_epochs": 0}),
        ("gdpd", {"gdpd": GDPDConfig(hidden=32, weight=0.0, prior_pretrain_steps=5)}),
    ],
)
def test_switched_off_distillation_reproduces_the_plain_student(toy, method, changes) -> None:
    # equal budgets: same initial student, epochs, minibatch order and selection window,
    # so a method whose distillation term is switched off trains the no-KD student
    # exactly (the diffusion noise and prior pre-training must not shift the batches)
    x, y = toy
    cfg = replace(TINY, grad_clip=0.0, **changes)
    teacher = train_teacher(x, y, x, y, TINY, seed=0).model
    xp = prefix_view(x, 0.5)
    plain = train_student("none", xp, x, y, xp, y, teacher, cfg, seed=3)
    other = train_student(method, xp, x, y, xp, y, teacher, cfg, seed=3)
    assert other.best_epoch == plain.best_epoch
    assert other.val_loss == plain.val_loss
    for (ka, va), (kb, vb) in zip(
        plain.model.state_dict().items(), other.model.state_dict().items(), strict=True
    ):
        assert ka == kb
        assert torch.equal(va, vb), ka


def test_training_leaves_global_rng_alone(toy) -> None:
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    _student("gdpd", toy)
    assert torch.equal(torch.rand(1), expected)


def test_student_refuses_bad_input(toy) -> None:
    x, y = toy
    with pytest.raises(ValueError, match="method"):
        train_student("distill", x, x, y, x, y, None, TINY, 0)
    with pytest.raises(ValueError, match="teacher"):
        train_student("logit", x, x, y, x, y, None, TINY, 0)
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="missing"):
        train_student("none", bad, x, y, x, y, None, TINY, 0)


def test_train_config_validates() -> None:
    with pytest.raises(ValueError, match="warmup_epochs"):
        TrainConfig(epochs=5, warmup_epochs=5)
    with pytest.raises(ValueError, match="arch"):
        TrainConfig(arch="resnet")


def test_estimator_fit_predict_on_partial_series(toy) -> None:
    x, y = toy
    labels = np.where(y == 1, "up", "flat")
    clf = PartialSeriesClassifier(
        earliness=0.5,
        method="gdpd",
        epochs=8,
        warmup_epochs=3,
        lr=3e-3,
        batch_size=8,
        length=32,
        widths=(8, 16, 8),
    ).fit(x, labels)
    partial = [s[:, :16] for s in x]  # observed halves, as a list
    proba = clf.predict_proba_partial(partial)
    assert proba.shape == (24, 2)
    assert np.allclose(proba.sum(1), 1.0, atol=1e-5)
    assert set(clf.predict_partial(partial)) <= {"flat", "up"}
    assert np.mean(clf.predict_partial(partial) == labels) >= 0.75
    # full series are cut to their first half: the same input as the observed halves
    np.testing.assert_allclose(clf.predict_proba(x), proba, rtol=1e-4, atol=1e-5)
    assert clf.score(x, labels) >= 0.75
    assert list(clf.classes_) == ["flat", "up"]


def test_estimator_refuses_bad_settings(toy) -> None:
    x, y = toy
    with pytest.raises(ValueError, match="earliness"):
        PartialSeriesClassifier(earliness=1.5).fit(x, y)
    with pytest.raises(ValueError, match="method"):
        PartialSeriesClassifier(method="magic").fit(x, y)
    with pytest.raises(NotFittedError, match="fit"):
        PartialSeriesClassifier().predict(x)


def test_grid_is_resumable_and_tabulated(tmp_path, monkeypatch) -> None:
    cfg = TrainConfig(arch="fcn", widths=(4, 8, 4), length=24, epochs=2, warmup_epochs=1)
    res = run_grid(["ItalyPowerDemand"], [0.5], [0], ["none", "gdpd"], cfg, tmp_path, False)
    cell = tmp_path / "cells" / "ItalyPowerDemand_e0.5_s0.json"
    assert cell.is_file()
    assert len(res) == 1
    assert set(res[0]["methods"]) == {"none", "gdpd"}

    # a finished cell is read back, not recomputed
    def boom(*args, **kwargs):
        raise AssertionError("recomputed a finished cell")

    monkeypatch.setattr("lc_timeseries_kd.experiment.run_cell", boom)
    again = run_grid(["ItalyPowerDemand"], [0.5], [0], ["none", "gdpd"], cfg, tmp_path, False)
    assert again == res == load_results(tmp_path)
    table = results_table(res)
    assert "| **average** | 0.5 |" in table
    agg = aggregate(res)
    assert agg["none"][0.5]["average"] == pytest.approx(100 * res[0]["methods"]["none"]["auc_prc"])


def test_resume_refuses_other_settings_and_keeps_config_json(tmp_path, monkeypatch) -> None:
    cfg = TrainConfig(arch="fcn", widths=(4, 8, 4), length=24, epochs=2, warmup_epochs=1)
    (first,) = run_grid(["ItalyPowerDemand"], [0.5], [0], ["none"], cfg, tmp_path, False)
    config_before = (tmp_path / "config.json").read_bytes()
    cell_path = tmp_path / "cells" / "ItalyPowerDemand_e0.5_s0.json"
    cell_before = cell_path.read_bytes()
    other = TrainConfig(arch="fcn", widths=(4, 8, 4), length=24, epochs=3, warmup_epochs=1)
    for change in (
        {"cfg": other},
        {"methods": ["none", "logit"]},
        {"weight_grid": [0.1]},
        {"baselines": ["quant"]},
    ):
        kw = {"cfg": cfg, "methods": ["none"], "weight_grid": None, "baselines": (), **change}
        with pytest.raises(ValueError, match="other settings") as err:
            run_grid(
                ["ItalyPowerDemand"],
                [0.5],
                [0],
                kw["methods"],
                kw["cfg"],
                tmp_path,
                False,
                weight_grid=kw["weight_grid"],
                baselines=kw["baselines"],
            )
        assert "changed:" in str(err.value)
        # nothing was mixed in or rewritten
        assert (tmp_path / "config.json").read_bytes() == config_before
        assert cell_path.read_bytes() == cell_before
    with pytest.raises(ValueError, match="epochs: 2 -> 3"):
        run_grid(["ItalyPowerDemand"], [0.5], [0], ["none"], other, tmp_path, False)
    # a cell edited by hand (another hash) is not taken as a result of these settings
    tampered = json.loads(cell_before)
    tampered["config_hash"] = "0" * 16
    cell_path.write_text(json.dumps(tampered))
    with pytest.raises(ValueError, match="1 cell"):
        run_grid(["ItalyPowerDemand"], [0.5], [0], ["none"], cfg, tmp_path, False)
    cell_path.write_bytes(cell_before)
    # rerun=True recomputes the stale cell with the new settings, says so, and
    # records the new settings
    with pytest.warns(RuntimeWarning, match="moved 1 stale cell"):
        (redone,) = run_grid(
            ["ItalyPowerDemand"], [0.5], [0], ["none"], other, tmp_path, False, rerun=True
        )
    # the old cell was kept aside, under its own hash
    aside = tmp_path / "stale" / first["config_hash"] / "ItalyPowerDemand_e0.5_s0.json"
    assert aside.read_bytes() == cell_before
    # later runs of the new settings (other cells too) go on without complaint
    (more,) = run_grid(["ItalyPowerDemand"], [0.4], [0], ["none"], other, tmp_path, False)
    assert more["config_hash"] == redone["config_hash"]
    assert redone["config_hash"] != first["config_hash"]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["config_hash"] == redone["config_hash"]
    assert saved["settings"]["epochs"] == 3
    assert load_results(tmp_path) == [more, redone]
    # cells written by an earlier version (no hash, no config.json) are refused too
    legacy = tmp_path / "legacy"
    (legacy / "cells").mkdir(parents=True)
    (legacy / "cells" / "ItalyPowerDemand_e0.5_s0.json").write_text(
        json.dumps(first | {"config_hash": None})
    )
    with pytest.raises(ValueError, match="other settings"):
        run_grid(["ItalyPowerDemand"], [0.5], [0], ["none"], cfg, legacy, False)


def test_weight_grid_keeps_the_candidate_with_the_lowest_validation_loss(tmp_path) -> None:
    cfg = TrainConfig(arch="fcn", widths=(4, 8, 4), length=24, epochs=3, warmup_epochs=1)
    methods = ["none", "logit", "gdpd"]
    (cell,) = run_grid(["ItalyPowerDemand"], [0.5], [0], methods, cfg, tmp_path, False, [0.1, 1.0])
    assert "candidates" not in cell["methods"]["none"]
    for m in ("logit", "gdpd"):
        r = cell["methods"][m]
        cands = r["candidates"]
        assert set(cands) == {"0.1", "1"}
        best = min(cands, key=lambda k: cands[k]["val_loss"])
        assert r["weight"] == float(best)
        assert r["auc_prc"] == cands[best]["auc_prc"]
        assert r["val_loss"] == cands[best]["val_loss"]
        assert r["cpu_seconds"] == pytest.approx(sum(c["cpu_seconds"] for c in cands.values()))
    # the grid's weight reaches training: different weights give different students
    g = cell["methods"]["gdpd"]["candidates"]
    assert g["0.1"]["val_loss"] != g["1"]["val_loss"]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["settings"]["weight_grid"] == [0.1, 1.0]
    assert saved["config_hash"] == cell["config_hash"]
    assert select_by_validation({"a": {"val_loss": 1.0}, "b": {"val_loss": 1.0}}) == "a"
    with pytest.raises(ValueError, match="weight_grid"):
        run_grid(["ItalyPowerDemand"], [0.4], [0], ["gdpd"], cfg, tmp_path, False, [-1.0])


def test_grid_refuses_unknown_datasets(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"bundled datasets: .*GunPoint"):
        run_grid(["NotADataset"], [0.5], [0], ["none"], TINY, tmp_path, False)


def test_cli_lists_datasets_and_reports_bad_input(tmp_path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["datasets"])
    assert out.exit_code == 0
    assert "GunPoint" in out.output
    bad = runner.invoke(app, ["run", "--datasets", "Nope", "--out", str(tmp_path)])
    assert bad.exit_code == 2
    assert "bundled datasets" in bad.output
    bad_e = runner.invoke(
        app, ["run", "--datasets", "GunPoint", "--earliness", "1.5", "--out", str(tmp_path)]
    )
    assert bad_e.exit_code == 2
    assert "earliness" in bad_e.output


def test_cli_run_writes_json_and_table(tmp_path) -> None:
    runner = CliRunner()
    args = [
        "run",
        "--datasets",
        "ItalyPowerDemand",
        "--earliness",
        "0.4",
        "--seeds",
        "1",
        "--methods",
        "none,logit",
        "--epochs",
        "2",
        "--warmup",
        "1",
        "--length",
        "24",
        "--widths",
        "4,8,4",
        "--out",
        str(tmp_path),
    ]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data[0]["earliness"] == 0.4
    assert set(data[0]["methods"]) == {"none", "logit"}
    assert (tmp_path / "table.md").read_text().startswith("| dataset | earliness | none | logit |")
    shown = runner.invoke(app, ["table", str(tmp_path)])
    assert shown.exit_code == 0
    assert "ItalyPowerDemand" in shown.output
    # the same directory with other settings is refused with one error line
    changed = runner.invoke(app, [*args[:-2], "--epochs", "3", "--out", str(tmp_path)])
    assert changed.exit_code == 2
    assert "other settings" in changed.output
    assert "epochs: 2 -> 3" in changed.output

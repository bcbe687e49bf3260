"""Bundled datasets, resampling, prefix views and splits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_timeseries_kd.data import (
    bundled_datasets,
    check_earliness,
    load_bundled,
    prefix_length,
    prefix_view,
    prepare_dataset,
    resample,
    stratified_split,
)


def test_bundled_names_include_the_paper_style_ucr_uea_sets() -> None:
    names = bundled_datasets()
    for name in ("GunPoint", "ItalyPowerDemand", "ArrowHead", "BasicMotions", "JapaneseVowels"):
        assert name in names


def test_bundled_names_are_classification_problems_only() -> None:
    names = bundled_datasets()
    # aeon ships these regression problems in the same folder
    assert "CardanoSentiment" not in names
    assert "Covid3Month" not in names
    assert "GunPoint" in names
    _, y_tr, _, _ = load_bundled("ItalyPowerDemand")
    assert sorted(set(y_tr.tolist())) == ["1", "2"]


def test_classification_header_is_read_from_the_ts_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lc_timeseries_kd.data import is_classification_file

    cls = tmp_path / "a.ts"
    cls.write_text("@problemName a\n@univariate true\n@classLabel true 1 2\n@data\n1,2:1\n")
    reg = tmp_path / "b.ts"
    reg.write_text("@problemName b\n@targetLabel true\n@data\n1,2:0.5\n")
    unl = tmp_path / "c.ts"
    unl.write_text("@problemName c\n@classLabel false\n@data\n1,2\n")
    assert is_classification_file(cls)
    assert not is_classification_file(reg)
    assert not is_classification_file(unl)


def test_unknown_dataset_lists_the_bundled_ones_and_does_not_download() -> None:
    with pytest.raises(ValueError, match="not bundled") as err:
        load_bundled("FordA")
    assert "GunPoint" in str(err.value)


def test_load_gunpoint_official_split_sizes() -> None:
    x_tr, y_tr, x_te, _y_te = load_bundled("GunPoint")
    assert (len(x_tr), len(x_te)) == (50, 150)
    assert x_tr[0].shape == (1, 150)
    assert set(y_tr) == {"1", "2"}


def test_prepare_unequal_length_multivariate_dataset() -> None:
    ds = prepare_dataset("JapaneseVowels", length=40, seed=1)
    assert ds.x_train.shape[1:] == (12, 40)
    assert ds.n_classes == 9
    assert len(ds.y_train) + len(ds.y_val) == 270
    assert len(ds.y_test) == 370
    # standardised with training statistics
    assert np.allclose(np.concatenate([ds.x_train, ds.x_val]).mean(axis=(0, 2)), 0.0, atol=1e-4)


def test_prepare_is_deterministic_per_seed_and_splits_differ_across_seeds() -> None:
    a, b = prepare_dataset("GunPoint", seed=3), prepare_dataset("GunPoint", seed=3)
    c = prepare_dataset("GunPoint", seed=4)
    assert np.array_equal(a.x_val, b.x_val)
    assert not np.array_equal(a.x_val, c.x_val)


def test_resample_linear_interpolation_matches_closed_form() -> None:
    x = np.array([[[0.0, 2.0, 4.0]]])
    assert np.allclose(resample(x, 5), [[[0.0, 1.0, 2.0, 3.0, 4.0]]])


def test_resample_refuses_missing_values_and_mixed_channels() -> None:
    with pytest.raises(ValueError, match="missing"):
        resample(np.array([[[0.0, np.nan, 1.0]]]), 4)
    with pytest.raises(ValueError, match="channels"):
        resample([np.zeros((1, 5)), np.zeros((2, 5))], 4)


def test_resample_handles_unequal_lengths() -> None:
    out = resample([np.arange(3.0)[None], np.arange(7.0)[None]], 4)
    assert out.shape == (2, 1, 4)
    assert np.allclose(out[:, 0, -1], [2.0, 6.0])


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.01, float("nan")])
def test_earliness_outside_unit_interval_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="earliness"):
        check_earliness(bad)


def test_prefix_length_follows_floor_rule() -> None:
    assert [prefix_length(100, e) for e in (0.2, 0.4, 0.6, 0.8, 1.0)] == [20, 40, 60, 80, 100]
    assert prefix_length(10, 0.01) == 1


def test_prefix_view_restretches_the_observed_part_only() -> None:
    x = np.arange(20, dtype=np.float32).reshape(1, 1, 20)
    raw = prefix_view(x, 0.25, restretch=False)
    assert np.array_equal(raw[0, 0], np.arange(5))
    full = prefix_view(x, 0.25)
    assert full.shape == (1, 1, 20)
    # a linear ramp stays a ramp from the first to the last observed value
    assert np.allclose(full[0, 0], np.linspace(0.0, 4.0, 20), atol=1e-5)
    assert np.array_equal(prefix_view(x, 1.0), x)


@settings(max_examples=25)
@given(
    length=st.integers(2, 60),
    earliness=st.floats(0.01, 1.0),
    channels=st.integers(1, 3),
)
def test_prefix_view_never_looks_past_the_prefix(
    length: int, earliness: float, channels: int
) -> None:
    rng = np.random.default_rng(length)
    x = rng.normal(size=(2, channels, length)).astype(np.float32)
    k = prefix_length(length, earliness)
    y = x.copy()
    y[:, :, k:] = 100.0  # changing the unobserved future must not change the view
    assert np.allclose(prefix_view(x, earliness), prefix_view(y, earliness))
    v = prefix_view(x, earliness)
    assert v.shape == x.shape
    assert np.allclose(v[:, :, 0], x[:, :, 0])
    assert np.allclose(v[:, :, -1], x[:, :, k - 1])


def test_stratified_split_keeps_every_class_in_training() -> None:
    y = np.array([0] * 10 + [1] * 5 + [2])
    tr, va = stratified_split(y, 0.2, seed=0)
    assert set(y[tr]) == {0, 1, 2}
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(len(y)))
    assert np.bincount(y[va], minlength=3).tolist() == [2, 1, 0]

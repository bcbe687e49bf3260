"""Models, distillation losses and the AUC-PRC metric."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from lc_timeseries_kd.losses import FitNetHint, logit_kd_loss
from lc_timeseries_kd.metrics import accuracy, auc_prc
from lc_timeseries_kd.models import FCNClassifier, LSTMClassifier, build_model


@pytest.mark.parametrize("arch", ["lstm", "fcn"])
def test_models_split_into_features_and_head(arch: str) -> None:
    m = build_model(arch, 3, 4, hidden=10, layers=2, widths=(8, 8, 6))
    x = torch.randn(5, 3, 17)
    f = m.features(x)
    assert f.shape == (5, m.feature_dim)
    assert torch.allclose(m(x), m.head(f))
    assert m(x).shape == (5, 4)


def test_paper_lstm_is_three_layers_of_100() -> None:
    m = LSTMClassifier(1, 2)
    assert (m.lstm.num_layers, m.lstm.hidden_size, m.feature_dim) == (3, 100, 100)


def test_lstm_feature_is_causal() -> None:
    m = LSTMClassifier(1, 2, hidden=6, layers=2)
    x = torch.randn(2, 1, 12)
    a = m.lstm(x.transpose(1, 2))[0][:, 5]
    y = x.clone()
    y[:, :, 6:] = 9.0
    assert torch.allclose(a, m.lstm(y.transpose(1, 2))[0][:, 5])


def test_models_refuse_wrong_channels() -> None:
    with pytest.raises(ValueError, match="channels"):
        FCNClassifier(2, 3)(torch.zeros(1, 3, 10))
    with pytest.raises(ValueError, match="arch"):
        build_model("tcn", 1, 2)


def test_logit_kd_matches_closed_form_kl() -> None:
    s, t = torch.randn(6, 4), torch.randn(6, 4)
    temp = 3.0
    p = torch.softmax(t / temp, -1)
    expected = (p * (p.log() - torch.log_softmax(s / temp, -1))).sum(-1).mean() * temp**2
    assert torch.allclose(logit_kd_loss(s, t, temp), expected, atol=1e-6)
    assert float(logit_kd_loss(t, t)) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="shapes"):
        logit_kd_loss(s, t[:, :3])


def test_fitnet_hint_is_zero_at_an_exact_regression() -> None:
    hint = FitNetHint(3, 3)
    with torch.no_grad():
        hint.regressor.weight.copy_(torch.eye(3))
    f = torch.randn(4, 3)
    with torch.no_grad():
        assert float(hint(f, f)) == pytest.approx(0.0, abs=1e-12)
        assert float(hint(f, f + 1.0)) == pytest.approx(1.0, rel=1e-6)


def test_fitnet_regressor_is_bias_free_and_starts_near_zero() -> None:
    # as the paper's code: a bias-free 1x1 map initialised uniformly in [-0.005, 0.005],
    # so the hint loss starts at the teacher feature's mean square
    torch.manual_seed(0)
    hint = FitNetHint(16, 24)
    assert hint.regressor.bias is None
    assert float(hint.regressor.weight.detach().abs().max()) <= 0.005
    s, t = torch.randn(64, 16), torch.randn(64, 24) + 2.0
    with torch.no_grad():
        assert float(hint(s, t)) == pytest.approx(float((t**2).mean()), rel=0.02)


def test_auc_prc_perfect_and_reference_values() -> None:
    assert auc_prc([0, 1, 2], np.eye(3)) == 1.0
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    score = np.clip(y * 0.3 + rng.uniform(size=300), 0, 1)
    proba = np.stack([1 - score, score], axis=1)
    # trapezoidal PR-AUC is close to (not equal to) average precision; both classes averaged
    ap = np.mean([average_precision_score(y == c, proba[:, c]) for c in (0, 1)])
    assert auc_prc(y, proba) == pytest.approx(ap, abs=0.02)


def test_auc_prc_skips_absent_classes_and_checks_shapes() -> None:
    assert auc_prc([0, 0, 1], [[0.9, 0.1, 0.0], [0.8, 0.2, 0.0], [0.1, 0.9, 0.0]]) == 1.0
    with pytest.raises(ValueError):
        auc_prc([0, 1], [[0.5, 0.5]])
    assert accuracy([0, 1, 1], [[0.9, 0.1], [0.4, 0.6], [0.6, 0.4]]) == pytest.approx(2 / 3)

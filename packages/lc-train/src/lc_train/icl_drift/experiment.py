"""Train the in-context regressors on drifting tasks and measure their errors."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm

from lc_train.icl_drift.data import DriftConfig, sample_prompts
from lc_train.icl_drift.kalman import kalman_predict
from lc_train.icl_drift.models import KINDS, ICLRegressor

__all__ = ["TrainConfig", "evaluate", "run_sweep", "train_regressor"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of one run.

    Attributes:
        steps: Adam steps, each on a fresh batch of prompts (online training).
        batch: prompts per step.
        lr: Adam learning rate.
        n_heads: attention heads of the regressor.
        eval_batch: prompts used to measure train and test error.
    """

    steps: int = 1500
    batch: int = 256
    lr: float = 3e-3
    n_heads: int = 1
    eval_batch: int = 4096

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "n_heads", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass
class RunResult:
    """Errors (mean squared error on the query label) of one trained model."""

    kind: str
    rho: float
    seed: int
    train_error: float
    test_error: float
    decay: list[float]
    curve: list[float] = field(default_factory=list)


def evaluate(model: ICLRegressor, task: DriftConfig, batch: int, seed: int) -> float:
    """Query-label MSE of ``model`` on ``batch`` fresh prompts drawn with ``seed``."""
    data = sample_prompts(task, batch, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return float((model(data.tokens()) - data.y[:, -1]).pow(2).mean())


def train_regressor(
    kind: str, task: DriftConfig, train: TrainConfig, seed: int, progress: bool = False
) -> tuple[ICLRegressor, RunResult]:
    """Train one regressor online on ``task``.

    Training is online (a fresh batch every step), so the train error is the final value of
    the training objective, estimated on one fixed batch of training-distribution prompts,
    and the test error is measured on prompts from an unrelated seed; the two differ only by
    sampling noise here, as in the population analysis of the paper.

    Example:
        >>> task = DriftConfig(dim=2, n_context=6, rho=0.9)
        >>> _, r = train_regressor("gla", task, TrainConfig(steps=5, batch=8, eval_batch=16), seed=0)
        >>> r.kind, len(r.decay)
        ('gla', 1)
    """
    model = ICLRegressor(kind, task.dim, n_heads=train.n_heads, n_context=task.n_context, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=train.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, train.steps)
    gen = torch.Generator().manual_seed(seed)
    train_set = sample_prompts(task, train.eval_batch, torch.Generator().manual_seed(seed + 10**6))
    curve = []
    for _ in tqdm(range(train.steps), disable=not progress, desc=f"{kind} rho={task.rho}"):
        data = sample_prompts(task, train.batch, gen)
        loss = (model(data.tokens()) - data.y[:, -1]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        curve.append(float(loss.detach()))
    with torch.no_grad():
        train_err = float((model(train_set.tokens()) - train_set.y[:, -1]).pow(2).mean())
    test_err = evaluate(model, task, train.eval_batch, seed + 2 * 10**6)
    result = RunResult(
        kind=kind,
        rho=task.rho,
        seed=seed,
        train_error=train_err,
        test_error=test_err,
        decay=[float(x) for x in model.decay()],
        curve=curve[:: max(1, train.steps // 100)],
    )
    return model, result


def run_sweep(
    rhos: list[float],
    kinds: tuple[str, ...] = KINDS,
    seeds: tuple[int, ...] = (0,),
    task: DriftConfig | None = None,
    train: TrainConfig | None = None,
    progress: bool = True,
) -> dict:
    """Train every ``kind`` at every ``rho`` and seed; return a JSON-ready summary.

    The summary also holds the Kalman-filter (Bayes-optimal) error at each ``rho``.
    """
    base = task or DriftConfig()
    train = train or TrainConfig()
    runs = []
    kalman = {}
    jobs = [(rho, kind, seed) for rho in rhos for kind in kinds for seed in seeds]
    for rho, kind, seed in tqdm(jobs, disable=not progress, desc="icl drift sweep"):
        cfg = DriftConfig(dim=base.dim, n_context=base.n_context, rho=rho, noise=base.noise)
        _, result = train_regressor(kind, cfg, train, seed)
        runs.append(asdict(result))
        if rho not in kalman:
            data = sample_prompts(
                cfg, train.eval_batch, torch.Generator().manual_seed(seed + 2 * 10**6)
            )
            kalman[rho] = float((kalman_predict(data, cfg) - data.y[:, -1].double()).pow(2).mean())
    return {
        "task": asdict(base),
        "train": asdict(train),
        "runs": runs,
        "kalman_test_error": {str(k): v for k, v in kalman.items()},
    }

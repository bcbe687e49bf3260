"""Reproduce the contextual queueing bandit experiments and measure simulator throughput.

Writes JSON and PNG files to ``docs/benchmarks/lc-bandits/``:

* ``stochastic``: queue length and regret of every policy, i.i.d. contexts
  (lambda 0.7, slack 0.1, K 5, d 5, T 5000, 10 instances x 20 runs);
* ``adversarial``: the same with the oblivious switching adversary;
* ``cqb_eps_decay``: CQB-epsilon's regret at horizon T for T in {625, ..., 5000}
  (a separate run per T, since its schedule depends on T, each against the oracle
  simulated on the same environment, which at a shorter T is the exact prefix of the
  longer one) with a log-log fit, against the T^(-1/4) rate;
* ``cqb_opt_growth``: CQB-Opt's regret under adversarial contexts against log^2 t;
* ``slack_ablation``: slack in {0.05, 0.1, 0.15} for CQB-epsilon (stochastic contexts)
  and CQB-Opt (adversarial contexts);
* ``reproduction.json``: all headline numbers, fits, throughput and wall times.

Run from the repository root::

    uv run python packages/lc-bandits/benchmarks/reproduce.py [--workers 2] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import pathlib
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace

# one BLAS thread per worker process: the workers already use the cores
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-bandits"
POLICIES = ("oracle", "cqb_eps", "cqb_opt", "greedy", "fifo_ucb", "random")


@dataclass(frozen=True)
class Task:
    """One simulation: a policy on the environment of a problem, at a horizon."""

    key: str
    problem: object  # ProblemConfig (kept generic so the dataclass pickles cheaply)
    policy: str
    horizon: int


@functools.lru_cache(maxsize=4)
def _environment(problem, horizon: int):  # type: ignore[no-untyped-def]
    from lc_bandits import make_environment

    return make_environment(problem, horizon=horizon)


def _run(task: Task) -> tuple[str, np.ndarray, float, float]:
    """Simulate in a worker; returns (key, queue lengths [B, T], seconds, CPU seconds).

    CPU seconds (environment included) do not depend on how busy the machine is.
    """
    from lc_bandits import LearnerConfig, make_policy, simulate

    cpu = time.process_time()
    start = time.perf_counter()
    env = _environment(task.problem, task.horizon)
    env_s = time.perf_counter() - start
    p = task.problem
    pol = make_policy(task.policy, env.theta, LearnerConfig())
    res = simulate(
        pol, env, p.slack, p.param_norm, seed=1000 * p.seed + POLICIES.index(task.policy)
    )  # type: ignore[attr-defined]
    del env_s
    return task.key, res.lengths, res.seconds, time.process_time() - cpu


def main() -> None:
    from tqdm import tqdm

    from lc_bandits import ProblemConfig, curve_stats, fit_against, fit_loglog, queue_length_regret
    from lc_bandits.experiment import summarize
    from lc_bandits.plotting import LABELS, plot_experiment
    from lc_bandits.simulator import SimulationResult

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    horizon = 600 if args.quick else 5000
    reps = 2 if args.quick else 20
    base = ProblemConfig(horizon=horizon, runs_per_instance=reps, seed=0)
    stoch, adv = base, replace(base, contexts="adversarial")
    sweep = [horizon // 8, horizon // 4, horizon // 2]
    slacks = (0.05, 0.15)

    tasks: list[Task] = []
    for name, prob in (("stochastic", stoch), ("adversarial", adv)):
        tasks += [Task(f"{name}/{p}", prob, p, horizon) for p in POLICIES]
    tasks += [Task(f"decay/{t}", stoch, "cqb_eps", t) for t in sweep]
    tasks += [Task(f"decay/{t}/oracle", stoch, "oracle", t) for t in sweep]
    for s in slacks:
        ps, pa = replace(stoch, slack=s), replace(adv, slack=s)
        tasks += [Task(f"slack/{s}/stochastic/{p}", ps, p, horizon) for p in ("oracle", "cqb_eps")]
        tasks += [Task(f"slack/{s}/adversarial/{p}", pa, p, horizon) for p in ("oracle", "cqb_opt")]
    thr = ProblemConfig(horizon=horizon, num_instances=10, runs_per_instance=1, seed=1)
    tasks += [Task(f"throughput/{p}", thr, p, horizon) for p in POLICIES]

    # longest first, so the two workers finish together
    cost = {"oracle": 1, "random": 1}
    tasks.sort(key=lambda t: -(t.horizon * t.problem.total_runs * cost.get(t.policy, 6)))  # type: ignore[attr-defined]
    results: dict[str, tuple[np.ndarray, float]] = {}
    cpu_seconds: dict[str, float] = {}
    wall = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(_run, t) for t in tasks]
        for fut in tqdm(as_completed(futures), total=len(futures), desc="simulations"):
            key, lengths, secs, cpu = fut.result()
            results[key] = (lengths, secs)
            cpu_seconds[key] = cpu
    wall = time.perf_counter() - wall

    def sim(key: str) -> SimulationResult:
        lengths, secs = results[key]
        z = np.zeros(lengths.shape, dtype=bool)
        return SimulationResult(
            key.split("/")[-1], lengths, z, z.astype(np.int64), z.astype(float), secs
        )

    cpu_model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    report: dict[str, object] = {
        "machine": f"{os.cpu_count()}-core CPU ({cpu_model}, shared), {platform.machine()}, "
        f"Python {platform.python_version()}",
        "versions": {d: version(d) for d in ("lc-bandits", "numpy", "scipy")},
        "workers": args.workers,
        "cpu_count": os.cpu_count(),
        "settings": {"stochastic": asdict(stoch), "adversarial": asdict(adv)},
    }

    # 1. main comparisons -------------------------------------------------------------
    table = {}
    for name in ("stochastic", "adversarial"):
        raw = {p: sim(f"{name}/{p}") for p in POLICIES}
        rounds, summ = summarize(raw, record_every=10)
        payload = {
            "config": asdict(stoch if name == "stochastic" else adv),
            "rounds": rounds,
            "policies": {k: asdict(v) for k, v in summ.items()},
        }
        (out / f"{name}.json").write_text(json.dumps(payload) + "\n", encoding="utf-8")
        plot_experiment(
            rounds, summ, out / f"{name}.png", title=f"{name} contexts, λ=0.7, slack 0.1"
        )
        checkpoints = [t for t in (500, 1000, 2000, horizon) if t <= horizon]
        table[name] = {
            p: {
                "regret_at": {
                    str(t): round(
                        float(
                            queue_length_regret(raw[p].lengths, raw["oracle"].lengths)[
                                :, t - 1
                            ].mean()
                        ),
                        3,
                    )
                    for t in checkpoints
                },
                "final_regret": round(summ[p].final_regret, 3),
                "final_regret_stderr": round(summ[p].final_regret_stderr, 3),
                "mean_queue_at_T": round(float(raw[p].lengths[:, -1].mean()), 3),
                "seconds": round(raw[p].seconds, 2),
            }
            for p in POLICIES
        }
    report["regret_table"] = table

    # 2. CQB-epsilon decay: separate runs per horizon, each coupled with its oracle ----
    oracle_st = results["stochastic/oracle"][0]
    hs = [*sweep, horizon]
    regs, errs = [], []
    oracle_is_prefix = []
    for t in hs:
        if t == horizon:
            lengths, oracle_t = results["stochastic/cqb_eps"][0], oracle_st
        else:
            lengths, oracle_t = results[f"decay/{t}"][0], results[f"decay/{t}/oracle"][0]
            # the environment at T is the prefix of the T = 5000 one, so the oracle's
            # queue at T must be the T = 5000 oracle's queue at round T
            oracle_is_prefix.append(bool(np.array_equal(oracle_t, oracle_st[:, :t])))
        r = lengths[:, -1] - oracle_t[:, -1]
        regs.append(float(r.mean()))
        errs.append(float(r.std(ddof=1) / math.sqrt(r.size)))
    try:
        fit = fit_loglog(np.array(hs, float), np.array(regs))
        decay = {"slope": fit.slope, "slope_stderr": fit.slope_stderr, "r2": fit.r2}
    except ValueError as err:
        fit, decay = None, {"error": str(err)}
    pairs = {}
    for (t0, r0), (t1, r1) in zip(zip(hs, regs), zip(hs[1:], regs[1:])):
        if r0 > 0 and r1 > 0:
            pairs[f"{t0}->{t1}"] = math.log(r1 / r0) / math.log(t1 / t0)
        else:
            pairs[f"{t0}->{t1}"] = None
    report["cqb_eps_decay"] = {
        "horizons": hs,
        "regret": regs,
        "stderr": errs,
        "fit": decay,
        "slope_between_neighbours": pairs,
        "oracle_at_T_equals_prefix_of_T5000_oracle": all(oracle_is_prefix),
        "theory_slope": -0.25,
    }
    _plot_decay(out / "cqb_eps_decay.png", hs, regs, errs, fit)

    # 3. CQB-Opt growth under adversarial contexts vs log^2 t -------------------------
    reg_adv = queue_length_regret(
        results["adversarial/cqb_opt"][0], results["adversarial/oracle"][0]
    )
    ts = np.unique(np.geomspace(50, horizon, 12).astype(int))
    stats_t = curve_stats(reg_adv[:, ts - 1])
    lin = fit_against(np.log(ts) ** 2, stats_t.mean)
    # a cumulative view as well: mean regret over rounds 1..t (less noisy)
    cum = np.cumsum(reg_adv.mean(axis=0)) / np.arange(1, horizon + 1)
    report["cqb_opt_growth"] = {
        "t": ts.tolist(),
        "regret": stats_t.mean.tolist(),
        "stderr": stats_t.stderr.tolist(),
        "fit_vs_log2t": {"slope": lin.slope, "intercept": lin.intercept, "r2": lin.r2},
        "bound_ratio_regret_over_log2T": float(stats_t.mean[-1] / math.log(horizon) ** 2),
        "max_regret": float(reg_adv.mean(axis=0).max()),
        "argmax_round": int(reg_adv.mean(axis=0).argmax()) + 1,
    }
    _plot_growth(out / "cqb_opt_growth.png", ts, stats_t, lin, cum)

    # 4. slack ablation -----------------------------------------------------------------
    abl: dict[str, dict[str, object]] = {"cqb_eps (stochastic)": {}, "cqb_opt (adversarial)": {}}
    curves = {}
    for s in (0.05, 0.1, 0.15):
        for label, kind, pol in (
            ("cqb_eps (stochastic)", "stochastic", "cqb_eps"),
            ("cqb_opt (adversarial)", "adversarial", "cqb_opt"),
        ):
            if s == 0.1:
                q, o = results[f"{kind}/{pol}"][0], results[f"{kind}/oracle"][0]
            else:
                q, o = results[f"slack/{s}/{kind}/{pol}"][0], results[f"slack/{s}/{kind}/oracle"][0]
            reg = q - o
            crossing = np.flatnonzero(reg.mean(axis=0) > 1.0)
            abl[label][str(s)] = {
                "final_regret": round(float(reg[:, -1].mean()), 3),
                "peak_mean_queue": round(float(q.mean(axis=0).max()), 2),
                "last_round_regret_above_1": int(crossing[-1]) + 1 if crossing.size else 0,
            }
            curves[(label, s)] = (q.mean(axis=0), o.mean(axis=0))
    report["slack_ablation"] = abl
    _plot_ablation(out / "slack_ablation.png", curves, LABELS)

    # 5. throughput ---------------------------------------------------------------------
    report["throughput_10_runs"] = {
        p: {
            "seconds": round(results[f"throughput/{p}"][1], 3),
            "run_steps_per_second": round(10 * horizon / results[f"throughput/{p}"][1], 1),
        }
        for p in POLICIES
    }
    report["throughput_200_runs"] = {
        p: round(stoch.total_runs * horizon / results[f"stochastic/{p}"][1], 1) for p in POLICIES
    }
    report["simulations"] = len(tasks)
    report["wall_seconds"] = round(wall, 1)
    report["cpu_seconds_total"] = round(sum(cpu_seconds.values()), 1)
    report["cpu_seconds_per_task"] = {k: round(v, 2) for k, v in sorted(cpu_seconds.items())}
    report["load_average_at_end"] = os.getloadavg()
    (out / "reproduction.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    keys = (
        "cqb_eps_decay",
        "cqb_opt_growth",
        "slack_ablation",
        "wall_seconds",
        "cpu_seconds_total",
    )
    print(json.dumps({k: report[k] for k in keys}, indent=1))


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_decay(path, hs, regs, errs, fit) -> None:  # type: ignore[no-untyped-def]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    h = np.array(hs, float)
    r = np.array(regs)
    ax.errorbar(
        h, np.maximum(r, 1e-3), yerr=1.96 * np.array(errs), fmt="o-", label="CQB-ε, R_T (±95%)"
    )
    if fit is not None:
        ax.plot(h, np.exp(fit.intercept) * h**fit.slope, "--", label=f"fit: slope {fit.slope:.2f}")
    anchor = r[-1] if r[-1] > 0 else 1.0
    ax.plot(h, anchor * (h / h[-1]) ** -0.25, ":", label="T^(-1/4) (through last point)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("horizon T")
    ax.set_ylabel("queue-length regret at T")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_growth(path, ts, st, lin, cum) -> None:  # type: ignore[no-untyped-def]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    x = np.log(ts) ** 2
    ax.plot(x, st.mean, "o-", label="CQB-Opt, Q(t) - Q*(t)")
    ax.fill_between(x, st.low, st.high, alpha=0.2)
    ax.plot(x, lin.intercept + lin.slope * x, "--", label=f"linear fit in log²t (R²={lin.r2:.2f})")
    ax.plot(np.log(np.arange(1, cum.size + 1)) ** 2, cum, lw=0.8, label="running mean of regret")
    ax.set_xlabel("log² t")
    ax.set_ylabel("queue-length regret")
    ax.legend(fontsize=8)
    ax.set_title("adversarial contexts")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_ablation(path, curves, labels) -> None:  # type: ignore[no-untyped-def]
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, label in zip(axes, ("cqb_eps (stochastic)", "cqb_opt (adversarial)"), strict=True):
        for s in (0.05, 0.1, 0.15):
            q, o = curves[(label, s)]
            (line,) = ax.plot(np.arange(1, q.size + 1), q, label=f"slack {s}")
            ax.plot(np.arange(1, o.size + 1), o, ":", color=line.get_color(), lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel("mean queue length (dotted: oracle)")
        ax.set_title(label)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()

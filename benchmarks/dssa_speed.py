"""DSSA vs dense: prefill and per-token decode time, attention layer and whole model.

Everything runs side by side in one process, dense and DSSA alternating, so the ratios
hold on a shared machine. Times are reported as wall clock and as process CPU time;
with ``--threads 1`` (the default) CPU time is the robust measure on a loaded machine.

- Attention layer, SmolLM2-135M geometry (9 query heads, 3 KV heads, head dim 64,
  float32): dense is ``F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)``
  (what transformers' ``"sdpa"`` runs); DSSA is ``dssa_attention`` with
  ``DSSAConfig.small(query_block=64)`` (block selection included). Decode: one query
  over an ``S``-token cache (compressed keys cached, as in ``generate()``).
  ``--config NAME:FIELD=VALUE,...`` (repeatable) times other settings in the same run:
  dense and every setting take turns, round after round, so all share the machine's
  state; each row compares one setting with the dense time of the same run.
- Model: SmolLM2-135M-Instruct (``lc_agents.models.load_model``) cut to its first
  ``--layers`` decoder layers (all layers are alike, so the ratio is that of the whole
  stack; the embedding and a one-position LM head are included): prefill of ``S``
  random tokens with ``use_cache=True`` (best of ``--model-reps``), then
  ``--decode-steps`` greedy tokens, with the model's own ``"sdpa"`` vs ``enable_dssa``.
  ``--model-text docs`` reads the last window of Python's documentation instead of
  random tokens: real attention, so per-query selections overlap as in real use.

With ``--device cuda`` (bf16 by default) the same comparison runs on a GPU: wall clock
after a device synchronize, best of ``--reps``; the model is SmolLM2-135M's architecture
with random weights (``--random-weights``, implied on CUDA; latency does not depend on
the weight values), all 30 layers.

Writes ``docs/benchmarks/lc-attention-dssa/speed.json`` and ``speed.png`` (``speed_gpu.*``
on CUDA).

    uv run python benchmarks/dssa_speed.py --lengths 8192 16384 32768 --layers 4
    uv run python benchmarks/dssa_speed.py --lengths 16384 --model-lengths \
        --config published: --config c4s4:kernel_size=4,stride=4 --out /tmp/spans.json
    python benchmarks/dssa_speed.py --device cuda --lengths 8192 16384 32768 65536 \
        --model-lengths 8192 16384 32768 --layers 30 --reps 5
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from smollm2_shape import random_smollm2

from lc_attention.dssa import CompressedKeyCache, DSSAConfig, dssa_attention

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"


CUDA = False  # set by main(): synchronize the device around every timed call


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    if CUDA:
        torch.cuda.synchronize()
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    if CUDA:
        torch.cuda.synchronize()
    return time.perf_counter() - w0, time.process_time() - c0, out


def _best(fns: list[Callable[[], Any]], reps: int) -> list[tuple[float, float]]:
    """Best wall and CPU time of each function; the functions take turns, ``reps`` rounds."""
    runs: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, times in zip(fns, runs, strict=True):
            times.append(_timed(fn)[:2])
    return [(min(r[0] for r in times), min(r[1] for r in times)) for times in runs]


def _dense_layer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, enable_gqa=True
    )


def _row(
    kind: str,
    phase: str,
    s: int,
    dense: tuple[float, float],
    dssa: tuple[float, float],
    config: str = "dssa",
) -> dict[str, Any]:
    row = {
        "config": config,
        "kind": kind,
        "phase": phase,
        "length": s,
        "dense_wall_s": dense[0],
        "dssa_wall_s": dssa[0],
        "dense_cpu_s": dense[1],
        "dssa_cpu_s": dssa[1],
        "speedup_wall": dense[0] / dssa[0],
        "speedup_cpu": dense[1] / dssa[1],
    }
    # the headline ratio: process CPU time on CPU (robust on a shared machine), wall on GPU
    row["speedup"] = row["speedup_wall"] if CUDA else row["speedup_cpu"]
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return row


STEPS = 8


def attention_layer(
    lengths: list[int],
    cfgs: dict[str, DSSAConfig],
    reps: int,
    device: str = "cpu",
    dtype=torch.float32,
) -> list[dict[str, Any]]:
    rows = []
    g = torch.Generator().manual_seed(0)
    for s in lengths:
        q, k, v = (torch.randn(1, s, h, 64, generator=g).to(device, dtype) for h in (9, 3, 3))
        _dense_layer(q[:, :256], k[:, :256], v[:, :256], True)  # warm-up
        for c in cfgs.values():  # warm-up, sparse
            w = min(s, 2 * c.dense_len)
            dssa_attention(q[:, :w], k[:, :w], v[:, :w], c)
        dense, *dssa = _best(
            [lambda q=q, k=k, v=v: _dense_layer(q, k, v, True)]
            + [lambda q=q, k=k, v=v, c=c: dssa_attention(q, k, v, c) for c in cfgs.values()],
            reps,
        )
        rows += [_row("attention layer", "prefill", s, dense, t, n) for n, t in zip(cfgs, dssa)]

        def dense_steps(q=q, k=k, v=v) -> None:
            for _ in range(STEPS):
                _dense_layer(q[:, -1:], k, v, False)

        def dssa_steps(cfg: DSSAConfig, q=q, k=k, v=v) -> Callable[[], None]:
            cache = CompressedKeyCache()
            dssa_attention(q[:, -1:], k, v, cfg, cache=cache)  # fills the compressed keys

            def steps() -> None:
                for _ in range(STEPS):
                    dssa_attention(q[:, -1:], k, v, cfg, cache=cache)

            return steps

        dense, *dssa = _best([dense_steps] + [dssa_steps(c) for c in cfgs.values()], reps)
        per_step = [(w / STEPS, c / STEPS) for w, c in (dense, *dssa)]
        rows += [
            _row("attention layer", "decode", s, per_step[0], t, n)
            for n, t in zip(cfgs, per_step[1:])
        ]
    return rows


def _prefill_decode(
    model: Any, ids: torch.Tensor, steps: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    with torch.no_grad():
        w, c, out = _timed(lambda: model(ids, use_cache=True, logits_to_keep=1))
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        dw, dc = time.perf_counter() - w0, time.process_time() - c0
    return (w, c), (dw / steps, dc / steps)


def _best_prefill(
    model: Any, ids: torch.Tensor, steps: int, reps: int, cfgs: dict[str, DSSAConfig]
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Dense (first) and every config take turns, ``reps`` rounds: best prefill (wall and
    CPU separately) and the decode of the last round, per mode."""
    from lc_attention.hf import enable_dssa

    runs: list[list[Any]] = [[] for _ in range(len(cfgs) + 1)]
    for _ in range(reps):
        runs[0].append(_prefill_decode(model, ids, steps))
        for cfg, times in zip(cfgs.values(), runs[1:], strict=True):
            with enable_dssa(model, cfg):
                times.append(_prefill_decode(model, ids, steps))
    return [
        ((min(r[0][0] for r in times), min(r[0][1] for r in times)), times[-1][1]) for times in runs
    ]


def whole_model(
    lengths: list[int],
    cfgs: dict[str, DSSAConfig],
    layers: int,
    steps: int,
    reps: int = 1,
    device: str = "cpu",
    dtype=torch.float32,
    random_weights: bool = False,
    text: str = "random",
) -> list[dict[str, Any]]:
    from lc_attention.hf import enable_dssa

    if random_weights:
        model, total = random_smollm2(layers, device, dtype, max(lengths)), 30
        kind = f"SmolLM2-135M shape (random weights), {layers} of {total} layers"
    else:
        from lc_agents.models import load_model

        model, tok = load_model("smollm2-135m-instruct")
        total = len(model.model.layers)
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
        kind = f"SmolLM2-135M, {layers} of {total} layers"
    rows = []
    g = torch.Generator().manual_seed(0)
    if text == "docs":
        from dssa_quality import doc_window

        kind += ", documentation text"
    for s in lengths:
        if text == "docs":  # the last window of Python's documentation (real attention)
            ids = doc_window(tok, s, -1).to(device)
        else:
            ids = torch.randint(0, model.config.vocab_size, (1, s), generator=g).to(device)
        warm = ids if CUDA else ids[:, :256]  # GPU: compile every kernel variant first
        _prefill_decode(model, warm, 1)
        for cfg in cfgs.values():
            with enable_dssa(model, cfg):
                _prefill_decode(model, warm, 1)
        (dense_p, dense_d), *dssa = _best_prefill(model, ids, steps, reps, cfgs)
        for name, (dssa_p, dssa_d) in zip(cfgs, dssa, strict=True):
            rows.append(_row(kind, "prefill", s, dense_p, dssa_p, name))
            rows.append(_row(kind, "decode", s, dense_d, dssa_d, name))
    return rows


def _plot(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    """One panel per (measured, phase); one line per setting (x: length, y: speed-up)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(r.get("config", "dssa") for r in rows))
    panels = list(dict.fromkeys((r["kind"], r["phase"]) for r in rows))
    cols = min(2, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows), squeeze=False)
    for ax, (kind, phase) in zip(axes.flat, panels, strict=False):
        for name, mark in zip(configs, "osv^D<>p*h", strict=False):
            pts = sorted(
                (r["length"], r["speedup"])
                for r in rows
                if (r.get("config", "dssa"), r["kind"], r["phase"]) == (name, kind, phase)
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], f"{mark}-", label=name)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{kind}: {phase}", fontsize=8)
        ax.set_xlabel("context length (tokens)", fontsize=8)
        ax.set_ylabel("dense time / DSSA time", fontsize=8)
        ax.tick_params(labelsize=7)
        if len(configs) > 1:
            ax.legend(fontsize=7)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_configs(specs: list[str]) -> dict[str, DSSAConfig]:
    """``["NAME:FIELD=VALUE,...", ...]`` -> ``{NAME: DSSAConfig.small(query_block=64, ...)}``.

    Example:
        >>> parse_configs(["a:", "b:topk=32"])["b"].topk
        32
    """
    from dssa_quality import parse_config

    cfgs: dict[str, DSSAConfig] = {}
    for spec in specs:
        name, sep, fields = spec.partition(":")
        if not sep or not name:
            raise SystemExit(f"--config {spec!r}: give NAME:FIELD=VALUE,... (NAME: for none)")
        if name in cfgs:
            raise SystemExit(f"--config {spec!r}: the name {name!r} is used twice")
        name, cfg, phase = parse_config(f"{name}:query_block=64,{fields}")
        if phase != "both" or type(cfg) is not DSSAConfig:
            raise SystemExit(f"--config {spec!r}: phase and select are quality-run options")
        cfgs[name] = cfg
    return cfgs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    ap.add_argument("--model-lengths", type=int, nargs="*", default=None, help="default: --lengths")
    ap.add_argument("--layers", type=int, default=4, help="decoder layers kept for the model runs")
    ap.add_argument("--decode-steps", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2, help="attention layer: best of")
    ap.add_argument(
        "--model-reps", type=int, default=2, help="model prefill: best of (decode: last run)"
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    ap.add_argument(
        "--random-weights",
        action="store_true",
        help="SmolLM2-135M's architecture with random weights (implied on CUDA)",
    )
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME:FIELD=VALUE,...",
        help="a DSSA setting: overrides of DSSAConfig.small(query_block=64), e.g. "
        "k32:topk=32 (repeatable; default: one setting 'dssa' without overrides)",
    )
    ap.add_argument(
        "--model-text",
        choices=["random", "docs"],
        default="random",
        help="model input: random tokens, or the last window of Python's documentation "
        "(real text: the attention, and so per-query selections, are those of real use)",
    )
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: speed[_gpu].json")
    args = ap.parse_args()
    global CUDA
    CUDA = args.device == "cuda"
    if args.model_text == "docs" and (args.random_weights or CUDA):
        raise SystemExit("--model-text docs needs the embedded model (CPU, no --random-weights)")
    dtype = getattr(torch, args.dtype or ("bfloat16" if CUDA else "float32"))
    out = args.out or OUT / ("speed_gpu.json" if CUDA else "speed.json")
    torch.set_num_threads(args.threads)
    cfgs = parse_configs(args.config or ["dssa:"])
    t0 = time.perf_counter()
    rows = attention_layer(args.lengths, cfgs, args.reps, args.device, dtype)
    model_lengths = args.lengths if args.model_lengths is None else args.model_lengths
    if model_lengths:
        rows += whole_model(
            model_lengths, cfgs, args.layers, args.decode_steps, args.model_reps, args.device,
            dtype, random_weights=args.random_weights or CUDA, text=args.model_text,
        )  # fmt: skip
    machine = (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
        if CUDA
        else f"{platform.machine()} CPU, {args.threads} thread(s), shared with other jobs"
    )
    result = {
        "configs": {name: cfg.__dict__ for name, cfg in cfgs.items()},
        "dtype": str(dtype).removeprefix("torch."),
        "machine": machine,
        "timing": f"attention layer: best of {args.reps}; model: best of {args.model_reps} "
        f"prefills, mean of {args.decode_steps} decode steps after the last; dense and "
        "the settings take turns in every round; "
        + ("wall clock after a device synchronize" if CUDA else "CPU = process time"),
        "wall_s": time.perf_counter() - t0,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _plot(rows, out.with_suffix(".png"))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""DSSA vs dense attention, training-free: NIAH accuracy and long-text perplexity.

Runs every attention mode on the same items in one process and writes
``docs/benchmarks/lc-attention-dssa/quality.json`` (and ``quality.png``):

- NIAH: ``lc_evals.generate("niah_single")`` (essay haystack, 7-digit values), chat
  template with the answer prefix "The special magic number for <key> mentioned in the
  text above is" (as RULER), greedy; correct when the value appears in the reply.
- Perplexity (``--ppl-source docs``: the last windows of Python's documentation,
  ``pydoc_data.topics``, instead): essay-like text from ``lc_evals.haystack.essay_sentences``, next-token
  NLL over all tokens and over the second half of the text (where sparse mode has
  most keys to leave out).

Modes: ``dense`` (the model's own SDPA), ``dssa`` (``DSSAConfig.small(query_block=64)``,
the fast CPU path), ``dssa_tok`` (``DSSAConfig.small()``: per-token selection), and any
``--config NAME:FIELD=VALUE,...`` (``DSSAConfig.small`` with those overrides, e.g.
``--config k32:query_block=64,topk=32`` or ``--config bound:query_block=64,
block_score=bound``), which is added to the modes run. ``dense_layers`` is applied by
leaving the first layers' attention modules on SDPA. A ``phase=prefill`` (or
``phase=decode``) field runs that mode's DSSA only while reading the prompt (or only
while generating) and the model's SDPA otherwise, with a greedy loop of its own; it
tells which phase loses a needle. A ``select=oracle`` field chooses the blocks by their
true attention mass (``benchmarks/dssa_oracle.py``): what any block score could reach
at that budget. ``--seeds`` runs chosen NIAH items instead of the
first ``--n``. ``--prefill-chunk N`` feeds prompts and texts ``N`` tokens per forward
pass over a KV cache: at 32K one dense pass would build a ``[32K, 32K]`` mask per
layer. DSSA then selects for each chunk's queries over all earlier keys by the same
rule as in one pass; only blocks whose scores tie to float rounding may swap (on a 2K
SmolLM2 text: perplexity 87.44 chunked by 512, 87.48 in one pass; dense: identical).

    uv run python benchmarks/dssa_quality.py --lengths 4096 8192 --n 10 --ppl-texts 1
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import pathlib
import platform
import random
import time
from typing import Any

import torch
from dssa_oracle import OracleConfig, oracle_selection
from tqdm import tqdm

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"
MODES: dict[str, DSSAConfig | None] = {
    "dense": None,
    "dssa": DSSAConfig.small(query_block=64),
    "dssa_tok": DSSAConfig.small(),
}


def _niah_ids(tok: Any, length: int, seed: int) -> tuple[torch.Tensor, str]:
    from lc_evals import generate, render_prompt

    item = generate("niah_single", n=1, length=length, seed=seed, tokenizer=tok)[0]
    if tok.chat_template:  # an instruct model: its chat template
        msgs = [{"role": "user", "content": render_prompt(item)}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    else:  # a base model (the embedded Gemma-3-270M): the plain prompt
        text = render_prompt(item) + "\n\n"
    key = item.metadata["keys"][0]
    text += f"The special magic number for {key} mentioned in the text above is"
    return tok(text, return_tensors="pt").input_ids, item.answers[0]


def _essay_ids(tok: Any, length: int, seed: int) -> torch.Tensor:
    from lc_evals.haystack import essay_sentences

    sents = essay_sentences(random.Random(seed))
    text, n = "", 0
    while n < length:
        chunk = " ".join(next(sents) for _ in range(64))
        text = f"{text} {chunk}" if text else chunk
        n = len(tok(text).input_ids)
    return tok(text, return_tensors="pt").input_ids[:, :length]


@functools.cache
def _doc_tokens(tok: Any) -> torch.Tensor:
    """Python's own documentation (``pydoc_data.topics``, shipped with CPython): real
    English prose and code, about 113K SmolLM2 tokens, in a fixed order."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return tok(text, return_tensors="pt").input_ids[0]


def doc_window(tok: Any, length: int, index: int) -> torch.Tensor:
    """Window ``index`` (non-overlapping, ``[1, length]``) of the documentation tokens;
    a negative index counts from the end (held out from training)."""
    ids = _doc_tokens(tok)
    n = ids.shape[0] // length
    if not -n <= index < n:
        raise ValueError(f"the documentation holds {n} windows of {length} tokens, not {index}")
    i = index % n
    return ids[i * length : (i + 1) * length].unsqueeze(0)


def _ppl_ids(tok: Any, source: str, length: int, i: int) -> torch.Tensor:
    """Perplexity text ``i``: an essay (seed ``1000 + i``) or documentation window ``-1 - i``."""
    return (
        _essay_ids(tok, length, 1000 + i) if source == "essay" else doc_window(tok, length, -1 - i)
    )


@torch.no_grad()
def _nll(model: Any, ids: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Per-token next-token NLL ``[L - 1]``.

    The LM head runs on 1024 positions at a time; with ``chunk`` the text also goes
    through the model ``chunk`` tokens per pass over a KV cache, which bounds the
    attention's transient memory to ``[chunk, L]`` per head (a dense ``[L, L]`` mask at
    32K is 1 GB as bool, 4 GB as float).
    """
    from transformers import DynamicCache

    n = ids.shape[1]
    step = chunk or n
    cache = DynamicCache(config=model.config) if step < n else None
    out = []
    for c0 in range(0, n - 1, step):
        c1 = min(n, c0 + step)
        h = model.model(input_ids=ids[:, c0:c1], cache=cache, use_cache=cache is not None)
        h = h.last_hidden_state[0]
        for a in range(c0, min(c1, n - 1), 1024):
            e = min(c1, n - 1, a + 1024)
            logits = model.lm_head(h[a - c0 : e - c0]).float()
            out.append(
                torch.nn.functional.cross_entropy(logits, ids[0, a + 1 : e + 1], reduction="none")
            )
    return torch.cat(out)


def _run(model: Any, cfg: DSSAConfig | None, fn: Any) -> Any:
    if cfg is None:
        return fn()
    oracle = oracle_selection() if isinstance(cfg, OracleConfig) else contextlib.nullcontext()
    with enable_dssa(model, cfg), oracle:  # honours cfg.dense_layers (the module's layer_idx)
        return fn()


PHASES = ("both", "prefill", "decode")
SELECTS = ("score", "oracle")
PPL_SOURCES = {
    "essay": "essay text (lc_evals.haystack.essay_sentences)",
    "docs": "Python's documentation (pydoc_data.topics), windows counted from the end",
}


def _value(text: str) -> int | float | str:
    """``"32"`` -> 32, ``"0.25"`` -> 0.25, anything else stays a string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_config(spec: str) -> tuple[str, DSSAConfig, str]:
    """``"NAME:FIELD=VALUE,..."`` -> ``(NAME, DSSAConfig.small(FIELD=VALUE, ...), phase)``.

    Values that look like numbers become ints or floats; an optional ``phase`` field (one of
    ``PHASES``, default ``"both"``) says when the config is active, and
    ``select=oracle`` picks the blocks by their true attention mass
    (``benchmarks/dssa_oracle.py``) instead of the config's block score.

    Example:
        >>> parse_config("k32:query_block=64,topk=32")[1].topk
        32
        >>> parse_config("quarter:topk_fraction=0.25")[1].budget(512)
        128
    """
    name, _, fields = spec.partition(":")
    if not name:
        raise ValueError(f"--config {spec!r}: give NAME:FIELD=VALUE,...")
    kw: dict[str, object] = {}
    for item in filter(None, fields.split(",")):
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"--config {spec!r}: {item!r} is not FIELD=VALUE")
        kw[key.strip()] = _value(val.strip())
    phase = str(kw.pop("phase", "both"))
    if phase not in PHASES:
        raise ValueError(f"--config {spec!r}: phase={phase!r} is not one of {PHASES}")
    select = str(kw.pop("select", "score"))
    if select not in SELECTS:
        raise ValueError(f"--config {spec!r}: select={select!r} is not one of {SELECTS}")
    cfg = DSSAConfig.small(**kw)
    return name, OracleConfig(**cfg.__dict__) if select == "oracle" else cfg, phase


PHASE: dict[str, str] = {}  # mode -> phase, for the --config modes that set one


@torch.no_grad()
def _greedy(
    model: Any,
    ids: torch.Tensor,
    max_new: int,
    prefill_cfg: DSSAConfig | None,
    decode_cfg: DSSAConfig | None,
    eos: int | None,
    chunk: int | None = None,
) -> torch.Tensor:
    """Greedy decoding, with ``prefill_cfg`` (None: SDPA) while reading the prompt and
    ``decode_cfg`` while generating; the prompt goes in ``chunk`` tokens per pass
    (all at once when None), and only the last position's logits are computed."""
    from transformers import DynamicCache

    past = DynamicCache(config=model.config)
    step = chunk or ids.shape[1]

    def prefill() -> Any:
        out = None
        for a in range(0, ids.shape[1], step):
            out = model(ids[:, a : a + step], cache=past, use_cache=True, logits_to_keep=1)
        return out

    nxt = _run(model, prefill_cfg, prefill).logits[:, -1:].argmax(-1)
    new = [nxt]

    def steps() -> None:
        nonlocal nxt
        for _ in range(max_new - 1):
            if eos is not None and int(nxt) == eos:
                break
            o = model(nxt, cache=past, use_cache=True)
            nxt = o.logits[:, -1:].argmax(-1)
            new.append(nxt)

    _run(model, decode_cfg, steps)
    return torch.cat([ids, *new], 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="lc_agents.models.load_model name")
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--n", type=int, default=10, help="NIAH items per length")
    ap.add_argument(
        "--seeds", type=int, nargs="*", default=None, help="NIAH items (default: 0..n-1)"
    )
    ap.add_argument("--ppl-texts", type=int, default=2, help="perplexity texts per length")
    ap.add_argument(
        "--ppl-source",
        choices=list(PPL_SOURCES),
        default="essay",
        help="essay: lc_evals essay text; docs: the last windows of Python's documentation",
    )
    ap.add_argument("--max-new", type=int, default=10)
    ap.add_argument("--modes", nargs="*", default=["dense", "dssa"], choices=list(MODES))
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME:FIELD=VALUE,...",
        help="an extra mode: DSSAConfig.small with these overrides (repeatable)",
    )
    ap.add_argument(
        "--prefill-chunk",
        type=int,
        default=None,
        help="tokens per forward pass while reading a prompt or a text (default: all)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "quality.json")
    args = ap.parse_args()
    for spec in args.config:
        name, cfg, phase = parse_config(spec)
        if name in MODES:
            raise ValueError(f"--config name {name!r} is taken by a built-in mode")
        MODES[name] = cfg
        if phase != "both":
            PHASE[name] = phase
        args.modes.append(name)
    seeds = list(range(args.n)) if args.seeds is None else args.seeds
    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model

    model, tok = load_model(args.model or "smollm2-135m-instruct")
    name = args.model or "SmolLM2-135M-Instruct"
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for length in args.lengths:
        row: dict[str, Any] = {"length": length, "niah_tokens": 0, "n": 0, "seeds": []}
        rows.append(row)
        nll: dict[str, list[torch.Tensor]] = {m: [] for m in args.modes}
        for seed in tqdm(range(args.ppl_texts), desc=f"PPL {length}"):
            ids = _ppl_ids(tok, args.ppl_source, length, seed)
            for mode in args.modes:
                cfg = None if PHASE.get(mode) == "decode" else MODES[mode]
                nll[mode].append(
                    _run(model, cfg, lambda ids=ids: _nll(model, ids, args.prefill_chunk))
                )
        for mode in args.modes:
            allv = torch.cat(nll[mode]) if nll[mode] else torch.full((1,), math.nan)
            second = torch.cat([x[x.shape[0] // 2 :] for x in nll[mode]] or [allv])
            row[mode] = {
                "ppl": math.exp(float(allv.mean())),
                "ppl_second_half": math.exp(float(second.mean())),
                "ppl_tokens": sum(int(x.numel()) for x in nll[mode]),
                "niah_hits": 0,
                "niah_s": 0.0,
                "replies": [],
            }
        _write(args, name, rows, time.perf_counter() - t_start)
        # NIAH, written after every item so an interrupted run keeps what it measured
        for seed in tqdm(seeds, desc=f"NIAH {length}"):
            ids, answer = _niah_ids(tok, length, seed)
            row["niah_tokens"] = int(ids.shape[1])
            for mode in args.modes:
                t0 = time.perf_counter()
                cfg = MODES[mode]
                if (mode in PHASE and cfg is not None) or args.prefill_chunk:
                    phase = PHASE.get(mode, "both")
                    out = _greedy(
                        model,
                        ids,
                        args.max_new,
                        cfg if phase != "decode" else None,
                        cfg if phase != "prefill" else None,
                        tok.eos_token_id,
                        args.prefill_chunk,
                    )
                else:
                    out = _run(
                        model,
                        cfg,
                        lambda ids=ids: model.generate(
                            ids,
                            max_new_tokens=args.max_new,
                            do_sample=False,
                            pad_token_id=tok.eos_token_id,
                        ),
                    )
                r = row[mode]
                r["niah_s"] += time.perf_counter() - t0
                text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
                r["replies"].append(text)
                r["niah_hits"] += int(answer in text)
            row["seeds"].append(seed)
            row["n"] = len(row["seeds"])
            for mode in args.modes:
                row[mode]["niah_acc"] = row[mode]["niah_hits"] / row["n"]
            _write(args, name, rows, time.perf_counter() - t_start)
        print(
            {
                k: v if not isinstance(v, dict) else {a: b for a, b in v.items() if a != "replies"}
                for k, v in row.items()
            }
        )


def _write(args: argparse.Namespace, name: str, rows: list[dict[str, Any]], wall: float) -> None:
    result = {
        "model": f"{name} (embedded, float32), training-free",
        "niah": "niah_single (lc_evals.generate, essay haystack, 7-digit values), chat template "
        "(plain prompt for a base model without one), greedy",
        "ppl": PPL_SOURCES[args.ppl_source] + ", next-token NLL",
        "configs": {
            m: (
                c.__dict__
                | ({"phase": PHASE[m]} if m in PHASE else {})
                | ({"select": "oracle"} if isinstance(c, OracleConfig) else {})
                if c is not None
                else "sdpa"
            )
            for m, c in MODES.items()
            if m in args.modes
        },
        "prefill_chunk": args.prefill_chunk,
        "machine": f"{platform.machine()}, {args.threads} threads, CPU (shared)",
        "wall_s": wall,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(rows) == 1:  # one length: a bar per mode
        _bars(args.modes, rows[0], args.out.with_suffix(".png"), plt)
        print(f"wrote {args.out}")
        return
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    xs = [r["length"] for r in rows]
    marks = ("o-", "s--", "^:", "v-.", "D--", "x:", "*-.")
    for mode, mark in zip(args.modes, marks, strict=False):
        acc = [r[mode].get("niah_acc", float("nan")) for r in rows]
        if any(a == a for a in acc):  # no NIAH item finished yet: nothing to draw
            axes[0].plot(xs, acc, mark, label=mode)
        axes[1].plot(xs, [r[mode]["ppl"] for r in rows], mark, label=mode)
    axes[0].set_ylabel("NIAH accuracy")
    axes[0].set_ylim(-0.05, 1.05)
    text = "essay text" if args.ppl_source == "essay" else "Python's documentation"
    axes[1].set_ylabel(f"perplexity ({text})")
    if not axes[0].lines:  # no NIAH items (--n 0): the perplexity panel only
        axes[0].set_axis_off()
    for ax in axes:
        ax.set_xlabel("context length (tokens)")
        if ax.lines:  # a log axis needs at least one drawn point
            ax.set_xscale("log", base=2)
            ax.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    plt.close(fig)
    print(f"wrote {args.out}")


def _bars(modes: list[str], row: dict[str, Any], path: pathlib.Path, plt: Any) -> None:
    """NIAH hits and perplexity of every mode at one length, as bars (perplexity only
    when no NIAH item was run)."""
    n_panels = 2 if row["n"] else 1
    width = max(6.0, 1.2 * len(modes) + 3) if n_panels == 2 else max(3.0, 0.9 * len(modes) + 2)
    fig, axes = plt.subplots(1, n_panels, figsize=(width, 3.2), squeeze=False)
    axes = list(axes[0])
    xs = range(len(modes))
    if n_panels == 2:
        hits = [row[m]["niah_hits"] for m in modes]
        axes[0].bar(xs, hits, color=["grey" if m == "dense" else "C0" for m in modes])
        axes[0].set_ylabel(f"NIAH hits of {row['n']}")
        axes[0].set_ylim(0, max(1, row["n"]))
    ppl = [row[m]["ppl"] for m in modes]
    axes[-1].bar(xs, ppl, color=["grey" if m == "dense" else "C1" for m in modes])
    if "dense" in modes and ppl[modes.index("dense")] == ppl[modes.index("dense")]:
        axes[-1].axhline(1.02 * ppl[modes.index("dense")], color="k", lw=0.8, ls="--")
        axes[-1].set_ylim(0.9 * min(p for p in ppl if p == p), 1.05 * max(ppl))
    axes[-1].set_ylabel("perplexity (dashed: dense + 2%)")
    for ax in axes:
        ax.set_xticks(list(xs), modes, rotation=30, fontsize=8)
        ax.set_title(f"{row['length']} tokens", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()

"""Length extrapolation that separates the methods: multi-key passkey and variable tracking.

Every model learns at lengths up to ``L`` to resolve queried names in a sequence of
random filler tokens holding several statements ``name := x`` (one token per statement,
``x`` a value or another name; its embedding starts at ``(e[name] + e[x]) / sqrt(2)``),
then is evaluated at ``L * m`` without fine-tuning. Two tasks share one vocabulary and
one trained model per (method, seed):

- ``multikey`` (multi-key passkey with distractor keys): ``--pairs`` statements
  ``name_i := value_i`` with distinct names and values. A model that averages over the
  statements, or attends uniformly, answers a distractor.
- ``vartrack`` (variable tracking across chunks): ``--chains`` chains of ``--hops``
  assignments ``a := v ... b := a ...`` (each link after the one it refers to, at random
  depths); a query names the last variable of a chain, the answer is the value at the
  head of its chain. Distractor chains have other names and values.

A sequence ends with queries about distinct chains, ``QUERY name value`` for all but the
last, ``QUERY name``; fewer chains are asked than exist (half of them), so that the last
answer cannot be found by elimination. Training supervises every query; evaluation
scores the last one, the output at the last position restricted to the value tokens
(chance ``1 / N_VALUES``).

Methods (``--methods``): ``rope``, ``alibi``, ``nope``, ``bam`` (the
[BAMTransformer][lc_attention.bam.BAMTransformer], ``bam``: shapes 0..1 across heads and
a 10x learning rate on the prior), ``hsa`` (the
[HSATransformer][lc_attention.hsa.HSATransformer]) and the three HSA ablations:
``hsa-no-encoder`` (``chunk_encoder=False``), ``hsa-no-bypass`` (``bypass_residual=False``)
and ``hsa-dense-train`` (``sparse_training=False``).

The run resumes after an interruption: trained models are checkpointed under
``--ckpt-dir`` and every evaluated (method, seed, task, length) cell is appended to
``<tag>_records.jsonl`` in ``--out``; a rerun skips what is there. Long sequences go
through the blockwise BAM attention path (causal SDPA for RoPE and NoPE) and HSA's query
blocks, batched to ``--max-tokens``, so memory stays linear in the length. Multipliers up
to 64 run for every model first; larger ones run for a (method, seed) only while one of
its tasks is still at or above 0.5 at the previous length.

Learning rate per method (``--lr-grid 3e-4,1e-3,3e-3``): every method is trained at
each rate of the grid (seeds ``--select-seeds``), scored on held-out sequences at the
training length only (fresh items of a generator seed that neither training nor the test
uses; for ``text``, held-out files), and the rate with the lowest held-out loss is the one
evaluated at every length. The HSA ablations take the rate selected for ``hsa``, so that
each differs from the full model in one factor. Each rate keeps its own files
(``<tag>_lr<rate>``, e.g. ``extrapolation_lr1e-3``); the selection goes to
``<tag>_selection.json`` and the results at the selected rates to ``<tag>_selected.json``
and ``.png``.

Perplexity on real text (``--tasks text``): byte-level language models (256 tokens, no
tokenizer) on the running Python's standard-library sources (the top-level ``.py`` files,
split by file: 6 in 8 for training, one in 8 for validation, one in 8 for the test, so no
test byte is seen in training). A test window is the first ``L * max(mults) + 1`` bytes
of a test file; at every length ``n`` the model reads the last ``n`` bytes before the
window's end, and the record holds bits per byte over all ``n`` predicted bytes and over
the last ``L`` of them (the same bytes at every length; only the context grows).

Run (the documented grid; see docs/benchmarks/lc-attention-extrapolation.md)::

    nice -n 10 uv run python packages/lc-attention/benchmarks/extrapolation.py

``--replot`` rebuilds the JSON summary and the PNG from the records alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from lc_attention.bam import BAMTransformer, BAMTransformerConfig
from lc_attention.hsa import HSATransformer, HSATransformerConfig

N_VALUES = 16  # value ids 0..15 (the answers)
N_NAMES = 16  # name ids 16..31
NAME0 = N_VALUES
N_RHS = N_VALUES + N_NAMES  # what a name can be assigned: a value or another name
ASSIGN0 = NAME0 + N_NAMES  # statement ids: one token per (name, value-or-name) pair
N_FILLER = 16
FILLER0 = ASSIGN0 + N_NAMES * N_RHS
QUERY = FILLER0 + N_FILLER
VOCAB = QUERY + 1
TASKS = ("multikey", "vartrack")
TEXT = "text"  # byte-level language modelling on held-out standard-library sources
TEXT_VOCAB = 256
METHODS = (
    "rope",
    "alibi",
    "nope",
    "bam",
    "hsa",
    "hsa-no-encoder",
    "hsa-no-bypass",
    "hsa-dense-train",
)
STYLES = {
    "rope": ("tab:gray", "o", "-"),
    "alibi": ("tab:orange", "s", "-"),
    "nope": ("tab:red", "D", "-"),
    "bam": ("tab:blue", "^", "-"),
    "hsa": ("tab:green", "v", "-"),
    "hsa-no-encoder": ("tab:olive", "P", "--"),
    "hsa-no-bypass": ("tab:purple", "X", "--"),
    "hsa-dense-train": ("tab:brown", "*", "--"),
}
M = TypeVar("M", BAMTransformer, HSATransformer)
ROOT = Path(__file__).resolve().parents[3]
OUT_DIR = ROOT / "docs" / "benchmarks" / "lc-attention-extrapolation"
CKPT_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lc-extrapolation"


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskSpec:
    """A task: ``chains`` chains of ``hops`` statements each; one chain is queried."""

    name: str
    chains: int
    hops: int
    queries: int

    @property
    def statements(self) -> int:
        return self.chains * self.hops


def task_spec(
    task: str, pairs: int = 6, chains: int = 3, hops: int = 2, queries: int | None = None
) -> TaskSpec:
    """The spec of ``task`` (``"multikey"``: ``pairs`` chains of one hop).

    ``queries`` (default: half the chains) distinct chains are asked in every sequence,
    fewer than the chains, so that the last answer cannot be found by elimination.
    """
    if task == "multikey":
        n = pairs
        spec = TaskSpec(task, pairs, 1, queries or max(1, pairs // 2))
    elif task == "vartrack":
        n = chains
        spec = TaskSpec(task, chains, hops, queries or max(1, chains // 2 + chains % 2))
    else:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if not 1 <= spec.queries <= n:
        raise ValueError(f"queries must lie in [1, {n}], got {spec.queries}")
    return spec


def make_example(
    spec: TaskSpec, length: int, gen: torch.Generator, queries: int | None = None
) -> tuple[list[int], list[int], int]:
    """One sequence of exactly ``length`` tokens, its answers and the answer's statement position.

    Statements ``KEY rhs lhs`` (``lhs := rhs``) sit at random, non-overlapping positions in
    random filler; in every chain ``KEY n_{j-1} n_j`` comes after ``KEY ... n_{j-1}``. Names
    are distinct across the sequence and the chains' values are distinct. The sequence
    ends with ``queries`` queries about distinct chains, ``QUERY name value`` each except
    the last, ``QUERY name``; the answers are the queried chains' values, in order (the
    last one is the answer to predict at the last position). The returned position is the
    statement holding the last answer.
    """
    queries = spec.queries if queries is None else queries
    if not 1 <= queries <= spec.chains:
        raise ValueError(f"queries must lie in [1, {spec.chains}], got {queries}")
    suffix = 3 * queries - 1
    if length < spec.statements + suffix:
        raise ValueError(
            f"length must be >= {spec.statements + suffix} for {spec.name}, got {length}"
        )
    n_st = spec.statements
    names = (torch.randperm(N_NAMES, generator=gen)[:n_st] + NAME0).view(spec.chains, spec.hops)
    values = torch.randperm(N_VALUES, generator=gen)[: spec.chains]
    # Interleave the chains: a random order of chain labels, each chain's links in order.
    order = torch.randperm(n_st, generator=gen) % spec.chains
    seen = [0] * spec.chains
    statements: list[tuple[int, int]] = []
    for c in order.tolist():
        j = seen[c]
        seen[c] += 1
        rhs = int(values[c]) if j == 0 else int(names[c, j - 1])
        statements.append((int(names[c, j]), rhs))
    # Random gaps: ``n_st + 1`` filler runs summing to the free length.
    free = length - suffix - n_st
    cuts = torch.randint(0, free + 1, (n_st,), generator=gen).sort().values.tolist()
    gaps = [b - a for a, b in zip([0, *cuts], [*cuts, free], strict=True)]
    filler = torch.randint(FILLER0, FILLER0 + N_FILLER, (free,), generator=gen).tolist()
    asked = torch.randperm(spec.chains, generator=gen)[:queries].tolist()
    target = asked[-1]
    tokens: list[int] = []
    used = 0
    head_pos = -1
    for i, (lhs, rhs) in enumerate(statements):
        tokens += filler[used : used + gaps[i]]
        used += gaps[i]
        if rhs == int(values[target]):
            head_pos = len(tokens)
        tokens.append(assign_token(lhs, rhs))
    tokens += filler[used:]
    for c in asked[:-1]:
        tokens += [QUERY, int(names[c, -1]), int(values[c])]
    tokens += [QUERY, int(names[target, -1])]
    return tokens, [int(values[c]) for c in asked], head_pos


def assign_token(lhs: int, rhs: int) -> int:
    """The statement token ``lhs := rhs`` (``lhs`` a name id, ``rhs`` a value or name id)."""
    if not (NAME0 <= lhs < ASSIGN0 and 0 <= rhs < N_RHS):
        raise ValueError(f"no statement token for {lhs} := {rhs}")
    return ASSIGN0 + (lhs - NAME0) * N_RHS + rhs


def parse_assign(token: int) -> tuple[int, int]:
    """``(lhs, rhs)`` of a statement token."""
    if not ASSIGN0 <= token < FILLER0:
        raise ValueError(f"{token} is not a statement token")
    i = token - ASSIGN0
    return NAME0 + i // N_RHS, i % N_RHS


def make_batch(
    spec: TaskSpec, batch: int, length: int, gen: torch.Generator, queries: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tokens [batch, length]`` int64 and ``answers [batch, queries]`` (value ids).

    ``queries`` defaults to ``spec.queries``; the answer ``j`` is predicted at
    ``query_positions(length, queries)[j]``, the last one at the last position.
    """
    queries = spec.queries if queries is None else queries
    rows, answers = [], []
    for _ in range(batch):
        t, a, _ = make_example(spec, length, gen, queries)
        rows.append(t)
        answers.append(a)
    return torch.tensor(rows, dtype=torch.long), torch.tensor(answers, dtype=torch.long)


def query_positions(length: int, queries: int) -> list[int]:
    """Positions (the queried names) whose outputs are the answers, in order."""
    return [length - 1 - 3 * (queries - 1 - j) for j in range(queries)]


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of ``k`` successes in ``n`` trials."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


# --------------------------------------------------------------------------- text


def stdlib_sources() -> list[Path]:
    """The top-level ``.py`` files of the running Python's standard library, sorted by name."""
    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))


def split_documents(docs: Sequence[bytes], split: str) -> list[bytes]:
    """The documents of ``split``: ``"test"`` (index 0 mod 8), ``"val"`` (4 mod 8), ``"train"``.

    A split by whole document, so that no test or validation byte occurs in training.
    """
    if split == "test":
        return [d for i, d in enumerate(docs) if i % 8 == 0]
    if split == "val":
        return [d for i, d in enumerate(docs) if i % 8 == 4]
    if split == "train":
        return [d for i, d in enumerate(docs) if i % 8 not in (0, 4)]
    raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")


def text_corpus(split: str) -> list[bytes]:
    """The standard-library sources of ``split`` (see [split_documents])."""
    return split_documents([p.read_bytes() for p in stdlib_sources()], split)


def byte_stream(docs: Sequence[bytes]) -> torch.Tensor:
    """The documents joined by blank lines, ``[N]`` int64 byte values."""
    data = b"\n\n".join(docs)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def text_batch(
    stream: torch.Tensor, batch: int, length: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``inputs [batch, length]`` and next-byte ``targets [batch, length]`` at random offsets."""
    if stream.numel() < length + 1:
        raise ValueError(f"stream of {stream.numel()} bytes is shorter than {length + 1}")
    starts = torch.randint(0, stream.numel() - length, (batch,), generator=gen)
    rows = torch.stack([stream[int(s) : int(s) + length + 1] for s in starts])
    return rows[:, :-1], rows[:, 1:]


def text_windows(docs: Sequence[bytes], size: int, count: int) -> list[torch.Tensor]:
    """The first ``size + 1`` bytes of the first ``count`` documents that long (``[size + 1]``)."""
    out = [byte_stream([d[: size + 1]]) for d in docs if len(d) > size]
    if not out:
        raise ValueError(f"no document is longer than {size} bytes")
    return out[:count]


@torch.no_grad()
def evaluate_text(
    model: nn.Module, windows: Sequence[torch.Tensor], length: int, tail: int, max_tokens: int
) -> tuple[list[float], list[float]]:
    """Bits per byte of each window at context ``length``: over all bytes, over the last ``tail``.

    The model reads the ``length`` bytes before each window's end and predicts each next
    byte; the last ``tail`` predicted bytes are the same at every ``length``.
    """
    model.eval()
    batch = max(1, max_tokens // length)
    bits_all: list[float] = []
    bits_tail: list[float] = []
    for start in range(0, len(windows), batch):
        rows = torch.stack([w[-length - 1 :] for w in windows[start : start + batch]])
        logits = model(rows[:, :-1])
        assert isinstance(logits, torch.Tensor)
        nats = nn.functional.cross_entropy(
            logits.float().transpose(1, 2), rows[:, 1:], reduction="none"
        )
        bits = nats / math.log(2.0)
        bits_all += bits.mean(1).tolist()
        bits_tail += bits[:, -tail:].mean(1).tolist()
    return bits_all, bits_tail


def mean_ci(xs: Sequence[float], z: float = 1.959964) -> tuple[float, float, float]:
    """Mean and normal 95% interval ``(mean, lo, hi)`` of ``xs`` (standard error over items)."""
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    mu = sum(xs) / n
    if n == 1:
        return mu, mu, mu
    sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1))
    return mu, mu - z * sd / math.sqrt(n), mu + z * sd / math.sqrt(n)


def is_text(args: argparse.Namespace) -> bool:
    """Whether the run is the text task (which cannot be mixed with the synthetic ones)."""
    tasks = [t for t in args.tasks.split(",") if t]
    if TEXT in tasks and tasks != [TEXT]:
        raise ValueError(f"--tasks {TEXT} cannot be combined with {TASKS}")
    return tasks == [TEXT]


# --------------------------------------------------------------------------- models


def build(method: str, args: argparse.Namespace, seed: int) -> nn.Module:
    """The model of ``method`` initialised with ``seed``."""
    text = is_text(args)
    vocab = TEXT_VOCAB if text else VOCAB
    tie = (lambda m: m) if text else tie_statement_embeddings
    if method.startswith("hsa"):
        cfg = HSATransformerConfig(
            vocab_size=vocab,
            dim=args.dim,
            num_heads=4,
            retrieval_heads=2,
            lower_layers=1,
            upper_layers=args.layers - 1,
            encoder_layers=1,
            chunk_size=args.chunk_size,
            topk=args.top_k,
            window=args.window,
            chunk_encoder=method != "hsa-no-encoder",
            bypass_residual=method != "hsa-no-bypass",
            sparse_training=method != "hsa-dense-train",
            gumbel_noise=args.gumbel,
            max_seq_len=1 << 20,
            query_chunk=512,
        )
        return tie(HSATransformer(cfg, seed=seed))
    if method not in ("rope", "alibi", "nope", "bam"):
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    cfg_b = BAMTransformerConfig(
        vocab_size=vocab,
        dim=args.dim,
        num_layers=args.layers,
        num_heads=4,
        position=method,
        shape_init="linear" if method == "bam" else 1.0,
        max_seq_len=1 << 20,
        # no prior: causal SDPA at every length (memory-efficient kernel, no bias)
        method="sdpa" if method in ("rope", "nope") else "auto",
        block_size=args.block_size,
    )
    return tie(BAMTransformer(cfg_b, seed=seed))


def tie_statement_embeddings(model: M) -> M:
    """Start every statement token's embedding at ``(e[lhs] + e[rhs]) / sqrt(2)``.

    Only the initialisation: the rows are trained freely afterwards. It gives all methods
    the same head start (a statement resembles the name it assigns), so that the short
    training budget goes into retrieval rather than into discovering the token structure.
    """
    emb = model.embed.weight
    with torch.no_grad():
        for tok in range(ASSIGN0, FILLER0):
            lhs, rhs = parse_assign(tok)
            emb[tok] = (emb[lhs] + emb[rhs]) / math.sqrt(2.0)
    return model


def _prior_params(model: nn.Module) -> list[nn.Parameter]:
    if isinstance(model, BAMTransformer) and model.config.position == "bam":
        return [p for pr in model.priors() for p in pr.parameters() if p.requires_grad]
    return []


def train_lengths(train_len: int, min_len: int, multiple: int) -> list[int]:
    """Training lengths: the multiples of ``multiple`` from ``min_len`` to ``train_len``."""
    lo = max(multiple, min(min_len, train_len))
    out = [n for n in range(lo, train_len + 1) if n % multiple == 0]
    return out or [train_len]


def train(model: nn.Module, args: argparse.Namespace, seed: int, label: str) -> dict:
    """Train on an even mix of the tasks at ``args.train_len``; returns a summary."""
    gen = torch.Generator().manual_seed(seed)
    text = is_text(args)
    specs = (
        []
        if text
        else [task_spec(t, args.pairs, args.chains, args.hops) for t in args.tasks.split(",")]
    )
    stream = byte_stream(text_corpus("train")) if text else None
    prior_ids = {id(p) for p in _prior_params(model)}
    groups: list[dict] = [
        {"params": [p for p in model.parameters() if id(p) not in prior_ids and p.requires_grad]}
    ]
    if prior_ids:
        groups.append({"params": _prior_params(model), "lr": args.lr * args.prior_lr_mult})
    opt = torch.optim.AdamW(groups, lr=args.lr, weight_decay=0.01)
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))
        ),
    )
    losses: list[float] = []
    model.train()
    t0 = time.perf_counter()
    lengths = train_lengths(args.train_len, args.min_train_len, args.chunk_size)
    for step in range(args.steps):
        length = lengths[int(torch.randint(0, len(lengths), (1,), generator=gen))]
        if stream is not None:  # next-byte prediction at every position
            tokens, targets = text_batch(stream, args.batch, length, gen)
            out = model(tokens)
            assert isinstance(out, torch.Tensor)
            loss = nn.functional.cross_entropy(out.reshape(-1, TEXT_VOCAB), targets.reshape(-1))
        else:
            spec = specs[step % len(specs)]
            # every query is supervised; evaluation scores the last one
            tokens, answers = make_batch(spec, args.batch, length, gen)
            out = model(tokens)
            assert isinstance(out, torch.Tensor)
            pos = query_positions(length, spec.queries)
            loss = nn.functional.cross_entropy(
                out[:, pos, :N_VALUES].reshape(-1, N_VALUES), answers.reshape(-1)
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if args.progress and (step + 1) % max(1, args.steps // 10) == 0:
            recent = losses[-max(1, args.steps // 10) :]
            print(f"  {label} step {step + 1}: loss {sum(recent) / len(recent):.3f}", flush=True)
    tail = losses[-max(1, args.steps // 10) :]
    return {
        "train_seconds": round(time.perf_counter() - t0, 1),
        "final_loss": sum(tail) / len(tail),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def trained_model(method: str, seed: int, args: argparse.Namespace) -> tuple[nn.Module, dict]:
    """Load the checkpoint of (method, seed) or train and checkpoint it."""
    model = build(method, args, seed)
    path = args.ckpt_dir / f"{args.tag}-{method}-seed{seed}.pt"
    if path.exists():
        state = torch.load(path, weights_only=True)
        model.load_state_dict(state["model"])
        return model, json.loads(state["info"])
    info = train(model, args, seed, f"{method}/s{seed}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "info": json.dumps(info)}, tmp)
    tmp.replace(path)
    return model, info


@torch.no_grad()
def evaluate(
    model: nn.Module, spec: TaskSpec, length: int, items: int, seed: int, max_tokens: int
) -> int:
    """Correct answers over ``items`` fresh sequences of ``length`` tokens."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    batch = max(1, min(32, max_tokens // length))
    hits = 0
    for start in range(0, items, batch):
        tokens, answers = make_batch(spec, min(batch, items - start), length, gen)
        logits = model(tokens)
        assert isinstance(logits, torch.Tensor)
        hits += int((logits[:, -1, :N_VALUES].argmax(-1) == answers[:, -1]).sum())
    return hits


@torch.no_grad()
def validate(model: nn.Module, args: argparse.Namespace, seed: int) -> dict:
    """Held-out loss and accuracy at the training length (the learning-rate selection score).

    Synthetic tasks: ``--val-items`` fresh sequences per task from generator seed
    ``20_000 + seed`` (training uses ``seed``, the test ``10_000 + 7 * seed + length``); the
    loss is the cross-entropy over every query, the accuracy that of the scored (last)
    query. ``text``: ``--val-items`` windows of the validation files, bits per byte. The
    returned ``loss`` (nats) is the mean over the tasks.
    """
    model.eval()
    length = args.train_len
    if is_text(args):
        gen = torch.Generator().manual_seed(20_000 + seed)
        stream = byte_stream(text_corpus("val"))
        nats = []
        for start in range(0, args.val_items, 32):
            x, y = text_batch(stream, min(32, args.val_items - start), length, gen)
            out = model(x)
            assert isinstance(out, torch.Tensor)
            nats.append(
                float(nn.functional.cross_entropy(out.reshape(-1, TEXT_VOCAB), y.reshape(-1)))
            )
        loss = sum(nats) / len(nats)
        return {"loss": loss, "tasks": {TEXT: {"bits_per_byte": loss / math.log(2.0)}}}
    per_task = {}
    for task in args.tasks.split(","):
        spec = task_spec(task, args.pairs, args.chains, args.hops)
        gen = torch.Generator().manual_seed(20_000 + seed)
        pos = query_positions(length, spec.queries)
        total, hits, n = 0.0, 0, 0
        for start in range(0, args.val_items, 32):
            tokens, answers = make_batch(spec, min(32, args.val_items - start), length, gen)
            out = model(tokens)
            assert isinstance(out, torch.Tensor)
            logits = out[:, pos, :N_VALUES]
            total += float(
                nn.functional.cross_entropy(
                    logits.reshape(-1, N_VALUES), answers.reshape(-1), reduction="sum"
                )
            )
            hits += int((logits[:, -1].argmax(-1) == answers[:, -1]).sum())
            n += tokens.shape[0]
        per_task[task] = {"loss": total / (n * spec.queries), "accuracy": hits / n, "items": n}
    loss = sum(t["loss"] for t in per_task.values()) / len(per_task)
    return {"loss": loss, "tasks": per_task}


def lr_label(lr: float) -> str:
    """The file-name form of a learning rate: ``1e-3`` for 0.001, ``2.5e-4`` for 0.00025."""
    mant, exp = f"{lr:e}".split("e")
    return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"


def selection_key(method: str) -> str:
    """Whose learning rate ``method`` uses: the HSA ablations take the full model's."""
    return "hsa" if method.startswith("hsa") else method


def with_lr(args: argparse.Namespace, lr: float) -> argparse.Namespace:
    """``args`` at learning rate ``lr``, with the files of that rate (``<tag>_lr<rate>``)."""
    return argparse.Namespace(**{**vars(args), "lr": lr, "tag": f"{args.tag}_lr{lr_label(lr)}"})


def choose_lr(scores: dict[str, dict[str, dict]]) -> str:
    """The rate label with the lowest held-out loss (mean over seeds); ties: the smaller rate.

    ``scores[rate][seed] = {"loss": ..., ...}``.
    """
    if not scores:
        raise ValueError("no learning rate was scored")

    def mean_loss(label: str) -> float:
        per_seed = scores[label]
        return sum(v["loss"] for v in per_seed.values()) / len(per_seed)

    return min(sorted(scores, key=float), key=mean_loss)


def select_lrs(args: argparse.Namespace, methods: Sequence[str]) -> dict:
    """Train every selection method at every rate of ``--lr-grid``; pick each one's rate.

    Resumable: the models are checkpointed per rate and the scores kept in
    ``<tag>_selection.json``. Returns that file's content.
    """
    grid = [float(x) for x in args.lr_grid.split(",") if x]
    sel_seeds = [int(x) for x in args.select_seeds.split(",") if x]
    path = args.out / f"{args.tag}_selection.json"
    state: dict = json.loads(path.read_text()) if path.exists() else {}
    scores: dict = state.get("scores", {})
    keys = list(dict.fromkeys(selection_key(m) for m in methods))
    for key in keys:
        for lr in grid:
            sub = with_lr(args, lr)
            for seed in sel_seeds:
                per = scores.setdefault(key, {}).setdefault(lr_label(lr), {})
                if str(seed) in per:
                    continue
                model, info = trained_model(key, seed, sub)
                _save_info(sub, key, seed, info)
                val = validate(model, sub, seed)
                per[str(seed)] = {**val, "final_train_loss": info["final_loss"]}
                print(
                    f"select {key:6s} lr {lr_label(lr):6s} s{seed}: held-out loss "
                    f"{val['loss']:.3f} " + json.dumps(val["tasks"]),
                    flush=True,
                )
                _write_selection(path, args, grid, sel_seeds, scores)
    return _write_selection(path, args, grid, sel_seeds, scores)


def _write_selection(
    path: Path, args: argparse.Namespace, grid: list[float], seeds: list[int], scores: dict
) -> dict:
    chosen = {}
    for key, per_lr in scores.items():
        done = {lab: per for lab, per in per_lr.items() if len(per) == len(seeds)}
        if done:
            chosen[key] = float(choose_lr(done))
    state = {
        "grid": grid,
        "seeds": seeds,
        "criterion": (
            "lowest held-out loss at the training length (mean over tasks and seeds; "
            f"{args.val_items} items per task and seed, generator seed 20000 + seed)"
        ),
        "ablations": "hsa-no-encoder, hsa-no-bypass, hsa-dense-train use the rate chosen for hsa",
        "scores": scores,
        "chosen": chosen,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))
    return state


# --------------------------------------------------------------------------- records


def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interruption
                continue
    return out


def append_record(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a") as f:
        f.write(("\n" if cut else "") + json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def summarize(records: Sequence[dict], train_len: int) -> dict:
    """Per (method, task, length): pooled accuracy over seeds, Wilson interval, per seed."""
    cells: dict[tuple[str, str, int], list[dict]] = {}
    seen = set()
    for r in records:
        if r["task"] == TEXT:
            continue
        cell = (r["method"], r["seed"], r["task"], r["length"])
        if cell in seen:  # two processes evaluated the same cell: keep the first
            continue
        seen.add(cell)
        cells.setdefault((r["method"], r["task"], r["length"]), []).append(r)
    table: dict[str, dict[str, dict[str, dict]]] = {}
    for (m, t, length), rs in sorted(cells.items()):
        k = sum(r["correct"] for r in rs)
        n = sum(r["items"] for r in rs)
        lo, hi = wilson(k, n)
        table.setdefault(m, {}).setdefault(t, {})[str(length)] = {
            "mult": length // train_len,
            "correct": k,
            "items": n,
            "accuracy": k / n,
            "wilson95": [round(lo, 4), round(hi, 4)],
            "per_seed": {str(r["seed"]): r["correct"] / r["items"] for r in rs},
        }
    return table


def summarize_text(records: Sequence[dict], train_len: int) -> dict:
    """Per (method, length) of the text task: bits per byte, mean over windows and seeds.

    ``all``: over every predicted byte of the context; ``last``: over the last ``train_len``
    bytes (the same bytes at every length); ``last_minus_1x``: ``last`` minus its value at
    the training length, paired by window and seed. Normal 95% intervals over the windows.
    """
    cells: dict[tuple[str, int], list[dict]] = {}
    seen = set()
    for r in records:
        if r["task"] != TEXT or (r["method"], r["seed"], r["length"]) in seen:
            continue
        seen.add((r["method"], r["seed"], r["length"]))
        cells.setdefault((r["method"], r["length"]), []).append(r)
    table: dict[str, dict[str, dict]] = {}
    for (m, length), rs in sorted(cells.items()):
        entry: dict = {"mult": length // train_len, "tokens": length}
        for key in ("all", "last"):
            xs = [x for r in rs for x in r[f"bits_{key}"]]
            mu, lo, hi = mean_ci(xs)
            entry[key] = {"bits_per_byte": round(mu, 4), "ci95": [round(lo, 4), round(hi, 4)]}
        # the change on the same bytes against the training length, paired by window
        base = {
            r["seed"]: r
            for r in records
            if r["task"] == TEXT and r["method"] == m and r["length"] == train_len
        }
        diffs = [
            x - y
            for r in rs
            if r["seed"] in base
            for x, y in zip(r["bits_last"], base[r["seed"]]["bits_last"], strict=True)
        ]
        if diffs:
            mu, lo, hi = mean_ci(diffs)
            entry["last_minus_1x"] = {
                "bits_per_byte": round(mu, 4),
                "ci95": [round(lo, 4), round(hi, 4)],
            }
        entry["windows"] = sum(len(r["bits_all"]) for r in rs)
        entry["per_seed_all"] = {
            str(r["seed"]): round(sum(r["bits_all"]) / len(r["bits_all"]), 4) for r in rs
        }
        table.setdefault(m, {})[str(length)] = entry
    return table


def markdown_text_table(table: dict, train_len: int, key: str = "last") -> str:
    """Bits per byte (``key``: ``"all"`` or ``"last"``), a row per method, a column per length."""
    lengths = sorted({int(x) for per in table.values() for x in per})
    head = " | ".join(f"{n} ({n // train_len}x)" for n in lengths)
    lines = [f"| method | {head} |", "|---" * (len(lengths) + 1) + "|"]
    for method in METHODS:
        cells = table.get(method)
        if not cells:
            continue
        row = []
        for n in lengths:
            c = cells.get(str(n))
            if c is None:
                row.append("")
                continue
            lo, hi = c[key]["ci95"]
            row.append(f"{c[key]['bits_per_byte']:.3f} [{lo:.3f}, {hi:.3f}]")
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown_table(table: dict, train_len: int, task: str) -> str:
    """One markdown table of ``task``: a row per method, a column per length."""
    lengths = sorted({int(x) for per in table.values() for x in per.get(task, {})})
    head = " | ".join(f"{n} ({n // train_len}x)" for n in lengths)
    lines = [f"| method | {head} |", "|---" * (len(lengths) + 1) + "|"]
    for method in METHODS:
        cells = table.get(method, {}).get(task, {})
        if not cells:
            continue
        row = []
        for n in lengths:
            c = cells.get(str(n))
            if c is None:
                row.append("")
                continue
            lo, hi = c["wilson95"]
            seeds = len(c["per_seed"])
            row.append(f"{c['accuracy']:.2f} [{lo:.2f}, {hi:.2f}] n={c['items']}/{seeds}s")
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(table: dict, train_len: int, path: Path) -> None:
    """Accuracy (pooled over seeds, 95% Wilson band) against the length, one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TASKS), figsize=(12, 4.4), sharey=True)
    for ax, task in zip(axes, TASKS, strict=True):
        for i, (method, per_task) in enumerate(table.items()):
            cells = per_task.get(task)
            if not cells:
                continue
            xs = sorted(int(k) for k in cells)
            acc = [cells[str(x)]["accuracy"] for x in xs]
            lo = [cells[str(x)]["wilson95"][0] for x in xs]
            hi = [cells[str(x)]["wilson95"][1] for x in xs]
            color, marker, ls = STYLES.get(method, ("black", "o", "-"))
            mx = [x / train_len for x in xs]
            ax.plot(
                mx,
                acc,
                color=color,
                marker=marker,
                ls=ls,
                label=method,
                ms=10 - i,
                lw=2.4 - 0.2 * i,
            )
            ax.fill_between(mx, lo, hi, color=color, alpha=0.12)
        ax.axhline(1 / N_VALUES, color="grey", ls=":", lw=0.8)
        ax.axhline(0.9, color="grey", ls="--", lw=0.6)
        ax.axhline(0.5, color="grey", ls="--", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"evaluation length / training length ({train_len} tokens)")
        ax.set_title(task)
        ax.set_ylim(-0.02, 1.04)
    axes[0].set_ylabel("accuracy (seeds pooled, 95% Wilson)")
    axes[-1].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_text(table: dict, train_len: int, path: Path) -> None:
    """Bits per byte against the length: all predicted bytes, and the last ``train_len``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for ax, key, title in zip(
        axes,
        ("all", "last"),
        ("all predicted bytes", f"last {train_len} bytes (same bytes at every length)"),
        strict=True,
    ):
        for method, cells in table.items():
            xs = sorted(int(k) for k in cells)
            mu = [cells[str(x)][key]["bits_per_byte"] for x in xs]
            lo = [cells[str(x)][key]["ci95"][0] for x in xs]
            hi = [cells[str(x)][key]["ci95"][1] for x in xs]
            color, marker, ls = STYLES.get(method, ("black", "o", "-"))
            mx = [x / train_len for x in xs]
            ax.plot(mx, mu, color=color, marker=marker, ls=ls, label=method)
            ax.fill_between(mx, lo, hi, color=color, alpha=0.12)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"evaluation length / training length ({train_len} bytes)")
        ax.set_title(title)
    axes[0].set_ylabel("bits per byte (held-out files, 95% interval)")
    axes[-1].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_summary(
    args: argparse.Namespace,
    records: list[dict],
    infos: dict,
    stem: str | None = None,
    extra: dict | None = None,
) -> None:
    """``<stem>.json`` (default stem: the tag) and ``<stem>.png`` from the records."""
    stem = stem or args.tag
    text = is_text(args)
    if text:
        tasks = {
            TEXT: (
                "next-byte prediction on the standard-library sources of Python "
                f"{sys.version.split()[0]} (top-level .py files; index 0 mod 8 test, 4 mod 8 "
                "validation, the rest training)"
            ),
            "windows": "first bytes of each test file long enough for the longest length",
            "metric": "bits per byte: 'all' predicted bytes, 'last' train_len bytes",
        }
        table = summarize_text(records, args.train_len)
    else:
        tasks = {
            "multikey": f"{args.pairs} statements name := value, one token each (distinct names and values)",
            "vartrack": f"{args.chains} chains of {args.hops} assignments name := value-or-name, one token each",
            "queries": "half the chains asked, every answer supervised, the last one scored",
        }
        table = summarize(records, args.train_len)
    payload = {
        "tasks": tasks,
        "train_len": args.train_len,
        "train_lengths": [args.min_train_len, args.train_len],
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "model": {"dim": args.dim, "heads": 4, "attention_layers": args.layers},
        "hsa": {"chunk_size": args.chunk_size, "top_k": args.top_k, "window": args.window},
        "bam": {"shape_init": "linear", "prior_lr_mult": args.prior_lr_mult},
        "items_per_seed_and_length": args.items,
        "chance": 1 / (TEXT_VOCAB if text else N_VALUES),
        "machine": "2-core CPU shared with other jobs, 1 thread",
        **(extra or {}),
        "training": infos,
        "results": table,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(payload, indent=2))
    if not args.no_plot:
        (plot_text if text else plot)(table, args.train_len, args.out / f"{stem}.png")


def print_tables(args: argparse.Namespace, records: list[dict]) -> None:
    if is_text(args):
        table = summarize_text(records, args.train_len)
        for key in ("all", "last"):
            print(f"\nbits per byte ({key})\n" + markdown_text_table(table, args.train_len, key))
        return
    table = summarize(records, args.train_len)
    for task in TASKS:
        print(f"\n{task}\n" + markdown_table(table, args.train_len, task))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--train-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument(
        "--min-train-len",
        type=int,
        default=32,
        help="each batch takes a length uniformly from min..train-len (multiples of chunk-size)",
    )
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument(
        "--lr-grid",
        default="",
        help="comma-separated rates: select one per method on held-out data at the training length",
    )
    ap.add_argument("--select-seeds", default="0", help="seeds trained for the rate selection")
    ap.add_argument(
        "--rates-from",
        type=Path,
        default=None,
        help="a <tag>_selection.json whose chosen rates are used as they are (no new selection)",
    )
    ap.add_argument(
        "--val-items", type=int, default=200, help="held-out items (text: windows) per task, seed"
    )
    ap.add_argument("--prior-lr-mult", type=float, default=10.0)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=3, help="attention layers (HSA: 1 + upper)")
    ap.add_argument("--chunk-size", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--gumbel", action="store_true", help="Gumbel noise on HSA's top-k in training")
    ap.add_argument(
        "--block-size", type=int, default=256, help="block of BAM's and ALiBi's blockwise path"
    )
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--chains", type=int, default=3)
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--mults", default="1,4,16,64,128")
    ap.add_argument(
        "--items", type=int, default=50, help="items (text: test windows) per (seed, task, length)"
    )
    ap.add_argument("--max-tokens", type=int, default=16384, help="tokens per evaluation batch")
    ap.add_argument("--no-gate", action="store_true", help="run lengths above 64x for every model")
    ap.add_argument("--tag", default="extrapolation", help="file stem of the outputs")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--ckpt-dir", type=Path, default=CKPT_DIR)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--replot", action="store_true")
    ap.add_argument(
        "--tasks", default=",".join(TASKS), help=f"tasks trained and evaluated: {TASKS} or {TEXT}"
    )
    ap.add_argument("--no-plot", action="store_true", help="write the JSON only")
    args = ap.parse_args(argv)
    is_text(args)  # rejects a mix of text and synthetic tasks
    return args


def _save_info(args: argparse.Namespace, method: str, seed: int, info: dict) -> None:
    """Merge one model's training summary into ``<tag>_training.json``."""
    path = args.out / f"{args.tag}_training.json"
    infos = json.loads(path.read_text()) if path.exists() else {}
    infos[f"{method}/seed{seed}"] = info
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(infos, indent=2))


def _infos(args: argparse.Namespace) -> dict:
    path = args.out / f"{args.tag}_training.json"
    return json.loads(path.read_text()) if path.exists() else {}


def run_grid(
    args: argparse.Namespace, methods: Sequence[str], seeds: Sequence[int], mults: Sequence[int]
) -> None:
    """Train (or load) and evaluate every (method, seed) at every multiple; resumable."""
    rec_path = args.out / f"{args.tag}_records.jsonl"
    text = is_text(args)
    tasks = [t for t in args.tasks.split(",") if t]
    specs = {} if text else {t: task_spec(t, args.pairs, args.chains, args.hops) for t in tasks}
    windows: list[torch.Tensor] = []
    if text:
        windows = text_windows(text_corpus("test"), args.train_len * max(mults), args.items)
    # Short lengths first for every model, so that a stop leaves a complete coarse grid.
    for phase in ("short", "long"):
        for seed in seeds:
            for method in methods:
                done = {
                    (r["task"], r["length"])
                    for r in read_records(rec_path)
                    if r["method"] == method and r["seed"] == seed
                }
                model: nn.Module | None = None
                for mult in mults:
                    if (phase == "short") != (mult <= 64):
                        continue
                    length = args.train_len * mult
                    if (
                        mult > 64
                        and not args.no_gate
                        and not _alive(rec_path, method, seed, length // 2, args)
                    ):
                        continue
                    for task in tasks:
                        if (task, length) in done:
                            continue
                        if model is None:
                            model, info = trained_model(method, seed, args)
                            _save_info(args, method, seed, info)
                        t0 = time.perf_counter()
                        rec: dict = {"method": method, "seed": seed, "task": task}
                        rec.update(length=length, mult=mult)
                        if text:
                            b_all, b_last = evaluate_text(
                                model, windows, length, args.train_len, args.max_tokens
                            )
                            rec.update(items=len(windows), bits_all=b_all, bits_last=b_last)
                            score = f"{sum(b_all) / len(b_all):.3f} / {sum(b_last) / len(b_last):.3f} bpb"
                        else:
                            correct = evaluate(
                                model,
                                specs[task],
                                length,
                                args.items,
                                10_000 + 7 * seed + length,
                                args.max_tokens,
                            )
                            rec.update(items=args.items, correct=correct)
                            score = f"{correct / args.items:.2f}"
                        rec["seconds"] = round(time.perf_counter() - t0, 1)
                        append_record(rec_path, rec)
                        print(
                            f"{method:16s} s{seed} {task:9s} {length:6d} ({mult:3d}x) "
                            f"{score}  [{rec['seconds']} s]",
                            flush=True,
                        )
                write_summary(args, read_records(rec_path), _infos(args))
    write_summary(args, read_records(rec_path), _infos(args))


def selected_records(args: argparse.Namespace, chosen: dict[str, float], methods: Sequence[str]):
    """Each method's records and training summaries at its selected rate."""
    records: list[dict] = []
    infos: dict = {}
    for method in methods:
        lr = chosen.get(selection_key(method))
        if lr is None:
            continue
        sub = with_lr(args, lr)
        rs = read_records(sub.out / f"{sub.tag}_records.jsonl")
        records += [{**r, "lr": lr} for r in rs if r["method"] == method]
        infos.update(
            {k: {**v, "lr": lr} for k, v in _infos(sub).items() if k.split("/")[0] == method}
        )
    return records, infos


def reused_selection(path: Path, methods: Sequence[str]) -> dict:
    """The selection in ``path`` (a ``<tag>_selection.json``), checked to cover ``methods``."""
    if not path.exists():
        raise SystemExit(f"--rates-from: no such file {path}")
    selection = json.loads(path.read_text())
    missing = sorted({selection_key(m) for m in methods} - set(selection.get("chosen", {})))
    if missing:
        raise SystemExit(f"--rates-from {path.name} has no chosen rate for {missing}")
    return {**selection, "reused_from": path.name}


def write_selected(args: argparse.Namespace, selection: dict, methods: Sequence[str]) -> None:
    """``<tag>_selected.json`` / ``.png``: every method at its selected rate, with the selection."""
    records, infos = selected_records(args, selection["chosen"], methods)
    lrs = {m: selection["chosen"].get(selection_key(m)) for m in methods}
    extra = {"lr": "per method, see lr_per_method", "lr_per_method": lrs, "selection": selection}
    write_summary(args, records, infos, stem=f"{args.tag}_selected", extra=extra)
    print_tables(args, records)
    print("selected rates:", json.dumps(lrs))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {METHODS}")
    seeds = [int(s) for s in args.seeds.split(",")]
    mults = sorted(int(m) for m in args.mults.split(","))
    if args.lr_grid and args.rates_from:
        raise SystemExit("--lr-grid selects rates and --rates-from reuses them: give one")
    if args.lr_grid or args.rates_from:
        if args.rates_from:
            selection = reused_selection(args.rates_from, methods)
        elif args.replot:
            selection = json.loads((args.out / f"{args.tag}_selection.json").read_text())
        else:
            selection = select_lrs(args, methods)
        if args.replot:
            write_selected(args, selection, methods)
            return
        for method in methods:
            sub = with_lr(args, selection["chosen"][selection_key(method)])
            run_grid(sub, [method], seeds, mults)
        write_selected(args, selection, methods)
        return
    rec_path = args.out / f"{args.tag}_records.jsonl"
    if args.replot:
        write_summary(args, read_records(rec_path), _infos(args))
        print_tables(args, read_records(rec_path))
        return
    run_grid(args, methods, seeds, mults)
    print("wrote", args.out / f"{args.tag}.json")


def _alive(rec_path: Path, method: str, seed: int, length: int, args: argparse.Namespace) -> bool:
    """Whether (method, seed) still scores >= 0.5 on some task at ``length`` (gates > 64x).

    Text records have no accuracy: their longer lengths always run.
    """
    rs = [
        r
        for r in read_records(rec_path)
        if r["method"] == method and r["seed"] == seed and r["length"] == length
    ]
    return any(r["task"] == TEXT or r["correct"] / r["items"] >= 0.5 for r in rs)


if __name__ == "__main__":
    main()

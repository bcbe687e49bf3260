"""Learning head roles: HardKuma gates distilled against full attention.

For each calibration sequence of ``P + n`` tokens, the frozen model first runs densely
(the teacher): it fills a KV cache with the ``P``-token prefix and records the final
hidden states of the last ``n`` tokens. The student then re-runs only those ``n``
tokens on top of the cached prefix, as ``n`` teacher-forced decode steps of a hybrid
model: in every layer ``l`` and head ``h``, with a HardKuma sample ``z[l, h]``,

    o[l, h] = z[l, h] * full[l, h] + (1 - z[l, h]) * sparse[l, h],

where ``full`` is ordinary causal attention and ``sparse`` is attention restricted to the
``topk`` positions carried at head index ``h`` (for every decode row separately). A head
whose sample is above 1/2 publishes its own top-k positions to later layers, as a
retrieval head does at inference. Because prefill is dense at inference too, the
prefix needs no gradient and is computed once.

The objective is the relative squared error of the final hidden states plus a
Lagrangian term for the budget ``E[#retrieval] / #heads = target`` (expected L0 from
the closed-form ``P(z = 0)``); the multiplier follows gradient ascent (an equality
constraint, as in L0 structured pruning, so it also pulls back up after overshooting),
with an optional quadratic penalty ``c`` (damping) and a target annealed from the
gates' starting fraction over ``target_warmup`` steps:

    gap = E[L0] / N - target_t,
    L = ||H_s - H_t||^2 / ||H_t||^2 + lam * gap + (c / 2) * gap^2,
    lam <- lam + eta * gap.

With ``gate_unit="kv_head"`` one gate serves all query heads of a KV head (a group),
so the budget counts KV heads read in full, which is what bounds the decode step's
cost; the hard map then keeps whole groups. The hard roles rank gates by their score
``P(z=1) - P(z=0)`` averaged over the late steps (ties broken by the whole-run average;
see [lc_attention.lychee.ranking][]), because most gates end pinned at a bound.

Only the gate parameters are trained; the model's weights are frozen and restored.

Example:
    >>> cfg = RoleTrainingConfig(topk=16, decode_len=8, target_retrieval=0.5, steps=10)
    >>> result = train_head_roles(model, sequences, cfg)  # doctest: +SKIP
    >>> result.role_map.num_retrieval  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from lc_attention.integration import attention_modules, register_function
from lc_attention.lychee.hardkuma import STRETCH_HIGH, STRETCH_LOW, HardKumaGates
from lc_attention.lychee.ranking import ScoreAverage, annealed_target, select_by_rank
from lc_attention.lychee.roles import RoleMap, model_fingerprint

TRAIN_ATTN_NAME = "lc_lychee_train"
_ATTR = "lc_lychee_train"


@dataclass(frozen=True)
class RoleTrainingConfig:
    """Hyper-parameters of head-role training.

    Args:
        topk: token budget of sparse heads during training (use the inference value).
        decode_len: ``n``, trailing tokens of each sequence simulated as decode steps.
        target_retrieval: budget on the fraction of all gate units (query heads, or KV
            heads with ``gate_unit="kv_head"``) that stay retrieval units (the first
            layer's are always retrieval units and count).
        steps: optimizer steps (one calibration batch per step, cycling).
        batch_size: sequences per step.
        lr: Adam learning rate of the gates' ``log a`` and ``log b``.
        lambda_lr: ascent rate ``eta`` of the Lagrange multiplier.
        penalty: coefficient ``c`` of the quadratic budget penalty ``(c/2) gap^2``
            (damps the multiplier's oscillation; 0 = plain Lagrangian).
        target_warmup: steps over which the budget moves linearly from the gates'
            starting expected fraction to ``target_retrieval`` (0 = no warm-up).
        gate_unit: ``"head"`` (one gate per query head) or ``"kv_head"`` (one gate per
            KV head, shared by its query heads; the budget counts KV heads read).
        init_log_a: initial ``log a`` of every gate.
        init_log_b: initial ``log b`` of every gate.
        low: HardKuma stretch ``l``.
        high: HardKuma stretch ``r``.
        param_bound: ``log a`` and ``log b`` are clipped to ``[-bound, bound]`` after each
            step, so no gate saturates to a point mass with a vanishing gradient.
        exact_budget: the returned role map keeps exactly
            ``round(target_retrieval * #units)`` units, ranked by ``P(z=1) - P(z=0)``
            (see ``rank_by``); otherwise each unit's final median gate decides.
        rank_by: ``"average"`` ranks by the score averaged over the steps from
            ``score_from * steps`` on, ties broken by the whole-run average;
            ``"final"`` by the last step's score alone (ties in unit order).
        score_from: start of the averaging window as a fraction of ``steps``.
        seed: seed of the gate noise.

    Raises:
        ValueError: a field out of range (names field, value and allowed range).
    """

    topk: int = 64
    decode_len: int = 32
    target_retrieval: float = 0.25
    steps: int = 200
    batch_size: int = 1
    lr: float = 0.05
    lambda_lr: float = 1.0
    init_log_a: float = 0.0
    init_log_b: float = 0.0
    low: float = STRETCH_LOW
    high: float = STRETCH_HIGH
    param_bound: float = 1.5
    exact_budget: bool = True
    penalty: float = 0.0
    target_warmup: int = 0
    gate_unit: str = "head"
    rank_by: str = "average"
    score_from: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("topk", "decode_len", "steps", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not 0.0 < self.target_retrieval <= 1.0:
            raise ValueError(f"target_retrieval must be in (0, 1], got {self.target_retrieval}")
        for name in ("lr", "lambda_lr", "param_bound"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not (self.low < 0.0 and self.high > 1.0):
            raise ValueError(f"low < 0 < 1 < high required, got low={self.low}, high={self.high}")
        if not self.penalty >= 0:
            raise ValueError(f"penalty must be >= 0, got {self.penalty}")
        tw = self.target_warmup
        if not isinstance(tw, int) or isinstance(tw, bool) or tw < 0:
            raise ValueError(f"target_warmup must be an integer >= 0, got {tw!r}")
        if self.gate_unit not in ("head", "kv_head"):
            raise ValueError(f"gate_unit must be 'head' or 'kv_head', got {self.gate_unit!r}")
        if self.rank_by not in ("average", "final"):
            raise ValueError(f"rank_by must be 'average' or 'final', got {self.rank_by!r}")
        if not 0.0 <= self.score_from <= 1.0:
            raise ValueError(f"score_from must be in [0, 1], got {self.score_from}")


@dataclass
class RoleTrainingResult:
    """What [train_head_roles][lc_attention.lychee.train.train_head_roles] returns.

    Attributes:
        role_map: hard roles for inference, fingerprinted for the model.
        gates: the trained gates (``P(z=0)``, ``P(z=1)`` per unit, ``[L, H]`` or
            ``[L, HKV]``).
        history: one dict per step: ``loss``, ``distill``, ``expected_fraction``,
            ``target``, ``lambda``.
        score_late: per-unit score averaged over the late window (the ranking key).
        score_overall: per-unit score averaged over all steps (the tie-break).
    """

    role_map: RoleMap
    gates: HardKumaGates
    history: list[dict[str, float]] = field(default_factory=list)
    score_late: torch.Tensor | None = None
    score_overall: torch.Tensor | None = None


@dataclass
class _Carry:
    indices: torch.Tensor | None = None


@dataclass
class _TrainLayer:
    topk: int
    first: bool
    carry: _Carry
    z: torch.Tensor | None = None  # [HQ] gate sample of this step
    window: int | None = None  # sliding-window layer: dense attention over this window


def lychee_train_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Gated mix of full and carried-top-k attention for ``n`` teacher-forced decode rows.

    Args:
        module: attention module holding its ``lc_lychee_train`` plan.
        query: ``[B, HQ, n, D]`` (the decode rows).
        key: ``[B, HKV, P + n, D]`` (cached prefix plus the rows).
        value: ``[B, HKV, P + n, D]``.
        attention_mask: ignored (sequences are unpadded; the causal mask is built here).
        scaling: softmax scale.
        dropout: must be 0.

    Returns:
        ``([B, n, HQ, D], None)``.
    """
    plan: _TrainLayer = getattr(module, _ATTR)
    _, hq, n, d = query.shape
    t = key.shape[2]
    g = hq // key.shape[1]
    kx = key.repeat_interleave(g, dim=1)
    vx = value.repeat_interleave(g, dim=1)
    scale = d**-0.5 if scaling is None else scaling
    logits = torch.matmul(query, kx.transpose(-1, -2)).float() * scale  # [B, HQ, n, T]
    rows = torch.arange(t - n, t, device=query.device).view(n, 1)
    cols = torch.arange(t, device=query.device).view(1, t)
    masked = cols > rows
    if plan.window is not None:  # a sliding layer sees its last `window` positions
        masked = masked | (cols <= rows - plan.window)
    logits = logits.masked_fill(masked, float("-inf"))
    full = torch.matmul(torch.softmax(logits, dim=-1).to(vx.dtype), vx)
    if plan.window is not None:  # stays dense and leaves the carried token set alone
        return full.transpose(1, 2).contiguous(), None
    own = torch.topk(logits.detach(), plan.topk, dim=-1, sorted=False).indices
    if plan.first or plan.carry.indices is None:
        out = full
        plan.carry.indices = own
    else:
        assert plan.z is not None
        carried = plan.carry.indices
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, carried, True)
        sparse = torch.matmul(
            torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1).to(vx.dtype), vx
        )
        z = plan.z.to(full.dtype).view(1, hq, 1, 1)
        out = z * full + (1.0 - z) * sparse
        hard = (plan.z.detach() > 0.5).view(1, hq, 1, 1)
        plan.carry.indices = torch.where(hard, own, carried)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    register_function(TRAIN_ATTN_NAME, lychee_train_attention)


def _as_batch(sequences: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    if isinstance(sequences, torch.Tensor):
        seqs = sequences if sequences.dim() == 2 else sequences.unsqueeze(0)
    else:
        if not sequences:
            raise ValueError("sequences must not be empty")
        rows = [s.reshape(-1) for s in sequences]
        if len({r.numel() for r in rows}) != 1:
            raise ValueError(
                f"sequences must share one length, got {sorted({r.numel() for r in rows})}"
            )
        seqs = torch.stack(rows)
    if seqs.dim() != 2 or seqs.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"sequences must be integer token ids [N, L], got {seqs.dtype} {tuple(seqs.shape)}"
        )
    return seqs.long()


def _forward(decoder: torch.nn.Module, ids: torch.Tensor, cache: Any) -> torch.Tensor:
    name = (
        "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    )
    out = decoder(input_ids=ids, use_cache=True, **{name: cache})
    return out.last_hidden_state  # type: ignore[no-any-return]


def train_head_roles(
    model: torch.nn.Module,
    sequences: Sequence[torch.Tensor] | torch.Tensor,
    config: RoleTrainingConfig | None = None,
    *,
    progress: bool = True,
) -> RoleTrainingResult:
    """Learn which heads stay retrieval heads, by distillation against full attention.

    Args:
        model: a loaded decoder-only transformers model (Llama family, or Gemma-3
            whose sliding-window layers stay dense and keep pinned retrieval gates, so
            only its full-attention layers get learned roles), attention implementation ``"sdpa"`` or
            ``"eager"``; its weights are frozen during training and left unchanged.
        sequences: calibration token ids, ``[N, L]`` or a list of equal-length 1-D
            tensors, with ``L - decode_len >= topk``.
        config: hyper-parameters (default ``RoleTrainingConfig()``).
        progress: show a progress bar.

    Returns:
        A [RoleTrainingResult][lc_attention.lychee.train.RoleTrainingResult].

    Raises:
        ValueError: bad sequences, a prefix shorter than ``topk``, a budget below the
            pinned units' share (the first hybrid layer's heads, and every head of a
            sliding-window layer).
    """
    from transformers import DynamicCache

    cfg = config or RoleTrainingConfig()
    seqs = _as_batch(sequences)
    n_seq, length = seqs.shape
    prefix = length - cfg.decode_len
    if prefix < cfg.topk:
        raise ValueError(
            f"each sequence needs decode_len + topk = {cfg.decode_len + cfg.topk} tokens or "
            f"more (the prefix must hold topk positions), got {length}"
        )
    fp = model_fingerprint(model)
    num_layers, num_heads = fp["num_layers"], fp["num_heads"]
    group = num_heads // fp["num_kv_heads"] if cfg.gate_unit == "kv_head" else 1
    units = num_heads // group  # gates per layer
    total = num_layers * units
    mods = sorted(attention_modules(model), key=lambda m: int(m.layer_idx))  # type: ignore[arg-type]
    windows = [getattr(m, "sliding_window", None) or None for m in mods]
    if all(w is not None for w in windows):
        raise ValueError("the model has no full-attention layer to learn roles for")
    first = windows.index(None)  # the first hybrid layer: all retrieval
    # pinned to retrieval: the first hybrid layer and every sliding layer (kept dense)
    fixed = torch.tensor([[i == first or w is not None] * units for i, w in enumerate(windows)])
    n_fixed = int(fixed.sum())
    if cfg.target_retrieval * total < n_fixed:
        unit_name = "KV heads" if cfg.gate_unit == "kv_head" else "heads"
        where = "of the first layer" if n_fixed == units else "pinned (first hybrid + sliding)"
        raise ValueError(
            f"target_retrieval={cfg.target_retrieval} keeps fewer than the {n_fixed} {unit_name} "
            f"{where} (minimum {n_fixed / total:.4f})"
        )
    decoder: torch.nn.Module = model.base_model  # type: ignore[assignment]
    device = next(model.parameters()).device
    seqs = seqs.to(device)

    gates = HardKumaGates(
        num_layers, units, init_log_a=cfg.init_log_a, init_log_b=cfg.init_log_b,
        low=cfg.low, high=cfg.high, fixed=fixed,
    ).to(device)  # fmt: skip
    scores = ScoreAverage((num_layers, units), cfg.steps, cfg.score_from)
    # a short second-moment memory keeps the step size up when a gate nears saturation
    opt = torch.optim.Adam(gates.parameters(), lr=cfg.lr, betas=(0.9, 0.9))
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    lam = 0.0
    with torch.no_grad():
        start = float(gates.expected_l0()) / total
    history: list[dict[str, float]] = []

    # teacher: dense prefill caches and the final hidden states of the decode rows
    batches = [seqs[i : i + cfg.batch_size] for i in range(0, n_seq, cfg.batch_size)]
    teacher: list[tuple[Any, list[Any], torch.Tensor]] = []
    with torch.no_grad():
        for ids in batches:
            cache = DynamicCache()
            hidden = _forward(decoder, ids, cache)[:, prefix:]
            cache.crop(-cfg.decode_len)
            saved = [(lay.keys, lay.values) for lay in cache.layers]  # type: ignore[union-attr]
            teacher.append((cache, saved, hidden.float()))

    was_training = model.training
    previous = model.config._attn_implementation  # type: ignore[union-attr]
    grads = [p.requires_grad for p in model.parameters()]
    carry = _Carry()
    plans = [_TrainLayer(cfg.topk, i == first, carry, window=w) for i, w in enumerate(windows)]
    _register()
    try:
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        for m, plan in zip(mods, plans, strict=True):
            setattr(m, _ATTR, plan)
        model.set_attn_implementation(TRAIN_ATTN_NAME)  # type: ignore[operator]
        it = range(cfg.steps)
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc="head roles", leave=False)
        for step in it:
            cache, saved, target = teacher[step % len(teacher)]
            ids = batches[step % len(batches)][:, prefix:]
            z = gates.sample(gen)
            if group > 1:
                z = z.repeat_interleave(group, dim=1)  # [L, H]: a group shares its gate
            carry.indices = None
            for layer, plan in enumerate(plans):
                plan.z = z[layer]
            hidden = _forward(decoder, ids, cache).float()
            for lay, (k, v) in zip(cache.layers, saved, strict=True):
                lay.keys, lay.values = k, v  # back to the dense prefix, outside any graph
            distill = (hidden - target).pow(2).sum(-1).mean() / target.pow(2).sum(-1).mean()
            frac = gates.expected_l0() / total
            target_t = annealed_target(step, start, cfg.target_retrieval, cfg.target_warmup)
            gap = frac - target_t
            loss = distill + lam * gap + 0.5 * cfg.penalty * gap * gap
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                for p in gates.parameters():
                    p.clamp_(-cfg.param_bound, cfg.param_bound)
                scores.update(step, gates.p1() - gates.p0())
            lam = lam + cfg.lambda_lr * float(gap.detach())
            history.append(
                {
                    "step": float(step),
                    "loss": float(loss.detach()),
                    "distill": float(distill.detach()),
                    "expected_fraction": float(frac.detach()),
                    "target": target_t,
                    "lambda": lam,
                }
            )
            if progress and hasattr(it, "set_postfix"):
                it.set_postfix(
                    distill=f"{history[-1]['distill']:.4f}",
                    frac=f"{history[-1]['expected_fraction']:.3f}",
                )
    finally:
        model.set_attn_implementation(previous)  # type: ignore[operator]
        for m in mods:
            if hasattr(m, _ATTR):
                delattr(m, _ATTR)
        for p, g in zip(model.parameters(), grads, strict=True):
            p.requires_grad_(g)
        model.train(was_training)

    budget = max(units, min(total, math.floor(cfg.target_retrieval * total + 0.5)))
    if not cfg.exact_budget:
        hard = gates.hard(None).cpu()
    elif cfg.rank_by == "final":
        hard = gates.hard(budget).cpu()
    else:
        hard = select_by_rank(scores.late(), scores.overall(), budget, gates.fixed.cpu())
    hard = hard.repeat_interleave(group, dim=1)  # [L, H]
    meta = {
        "training": asdict(cfg),
        "final": history[-1] if history else {},
        "sequences": n_seq,
        "length": length,
    }
    role_map = RoleMap(tuple(tuple(bool(x) for x in row) for row in hard.tolist()), fp, meta)
    return RoleTrainingResult(
        role_map=role_map,
        gates=gates,
        history=history,
        score_late=scores.late(),
        score_overall=scores.overall(),
    )

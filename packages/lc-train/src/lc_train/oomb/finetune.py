"""Resumable long-context fine-tuning with chunk-recurrent training.

:func:`finetune` trains a causal LM on fixed-length windows of a text corpus, each step
computing exact gradients with :func:`~lc_train.oomb.chunk_recurrent_backward` (so the
window can be far longer than activation memory allows), either all weights or LoRA
adapters (``peft``). Every ``save_every`` steps it writes a checkpoint with the trained
weights, the optimizer and learning-rate schedule, the random-number generators and the
data position; ``resume=True`` continues from the latest one, and a resumed run follows
the same trajectory as an uninterrupted one.

Data: a ``.txt`` file (one document) or a ``.jsonl`` file with one document per line,
either text under ``text_field`` or pre-tokenized ``input_ids``. Documents are
tokenized, joined with the end-of-sequence token and cut into ``seq_len``-token windows;
each epoch visits the windows in an order drawn from ``seed + epoch``, so the data
position is just the number of windows consumed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from lc_train.lora import apply_lora
from lc_train.oomb.checks import check_model
from lc_train.oomb.config import ChunkRecurrentConfig

MODEL_ALIASES = {"smollm2": "smollm2-135m-instruct", "gemma3": "gemma-3-270m"}
"""Short names of the embedded models (loaded through ``lc_agents``)."""

UNSUPPORTED_EMBEDDED = {
    "gemma-3-270m": "Gemma 3 interleaves sliding-window attention layers (model_type "
    "gemma3_text), which chunk-recurrent training does not support"
}
"""Embedded models refused before loading, with the reason."""

# fields that define the trajectory: a resumed run must agree on them
_RUN_FIELDS = (
    "model",
    "data",
    "text_field",
    "seq_len",
    "chunk",
    "page",
    "steps",
    "batch",
    "lr",
    "weight_decay",
    "warmup",
    "grad_clip",
    "seed",
    "lora_rank",
    "lora_alpha",
    "page_budget",
    "dtype",
    "fsdp",
)


class FinetuneError(RuntimeError):
    """A fine-tuning run cannot start or resume (bad data, model, or checkpoint)."""


@dataclass(frozen=True)
class FinetuneConfig:
    """One fine-tuning run.

    Attributes:
        model: a local Hugging Face model directory, or an embedded model name
            (``smollm2``, ``gemma3`` or the full names known to ``lc_agents``; needs
            ``lc-train[agents]``).
        data: path of a ``.txt`` or ``.jsonl`` corpus.
        out: output directory (checkpoints, ``log.jsonl``, ``final/``).
        seq_len: tokens per training window.
        chunk: chunk size of chunk-recurrent training (a multiple of ``page``).
        page: KV page size.
        steps: optimizer steps of the whole run.
        batch: windows per step.
        lr: peak learning rate (AdamW).
        weight_decay: AdamW weight decay.
        warmup: linear warm-up steps, then cosine decay to 10% of ``lr``.
        grad_clip: clip the gradient norm to this (0: no clipping).
        save_every: checkpoint every this many steps (and at the end).
        seed: seed of the data order, LoRA initialisation and dropout.
        text_field: key of the text in ``.jsonl`` lines.
        lora_rank: 0 trains all weights; ``> 0`` trains LoRA adapters of this rank on
            the attention and MLP projections (needs ``peft``, ``lc-train[trl]``).
        lora_alpha: LoRA scaling numerator.
        offload: keep KV pages in host memory (see ``ChunkRecurrentConfig.offload``).
        page_budget: page-level sparse attention budget (``None``: exact).
        loss_chunk: positions whose LM-head logits exist at once (see
            ``ChunkRecurrentConfig.loss_chunk_size``); ``None`` for the whole chunk.
        dtype: ``float32``, ``bfloat16`` or ``float16`` weights.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        fsdp: under ``torchrun`` with two or more ranks, shard the weights, gradients
            and optimizer state with FSDP2 (``fully_shard`` on every decoder layer, then
            on the model) instead of replicating them with DDP; checkpoints and the
            final model hold the full (gathered) tensors. One process trains unsharded.
        resume: continue from the latest checkpoint in ``out``.
        keep_checkpoints: how many recent checkpoints to keep.
    """

    model: str
    data: str
    out: str
    seq_len: int = 4096
    chunk: int = 1024
    page: int = 128
    steps: int = 100
    batch: int = 1
    lr: float = 1e-5
    weight_decay: float = 0.0
    warmup: int = 0
    grad_clip: float = 1.0
    save_every: int = 50
    seed: int = 0
    text_field: str = "text"
    lora_rank: int = 0
    lora_alpha: int = 16
    offload: bool = False
    page_budget: int | None = None
    loss_chunk: int | None = 512
    dtype: str = "float32"
    device: str = "auto"
    fsdp: bool = False
    resume: bool = False
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        for name in ("seq_len", "chunk", "page", "steps", "batch", "save_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FinetuneConfig.{name} must be a positive int, got {value!r}")
        for name in ("warmup", "lora_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"FinetuneConfig.{name} must be an int >= 0, got {value!r}")
        if self.keep_checkpoints < 1:
            raise ValueError(
                f"FinetuneConfig.keep_checkpoints must be >= 1, got {self.keep_checkpoints!r}"
            )
        if not self.lr > 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError(
                f"FinetuneConfig needs lr > 0, weight_decay >= 0 and grad_clip >= 0, got "
                f"lr={self.lr}, weight_decay={self.weight_decay}, grad_clip={self.grad_clip}"
            )
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(
                f"FinetuneConfig.dtype must be float32, bfloat16 or float16, got {self.dtype!r}"
            )
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(
                f"FinetuneConfig.device must be auto, cpu or cuda, got {self.device!r}"
            )
        if self.chunk > self.seq_len:
            raise ValueError(
                f"FinetuneConfig.chunk ({self.chunk}) must not exceed seq_len ({self.seq_len})"
            )
        self.chunk_config()  # validates chunk/page/page_budget/loss_chunk

    def chunk_config(self) -> ChunkRecurrentConfig:
        """The chunk-recurrent configuration of every step."""
        return ChunkRecurrentConfig(
            chunk_size=self.chunk,
            page_size=self.page,
            block_tokens=self.chunk,
            offload=self.offload,
            page_budget=self.page_budget,
            loss_chunk_size=self.loss_chunk,
            local_pages=min(2, self.page_budget or 2),
            sink_pages=1 if self.page_budget is None or self.page_budget > 2 else 0,
        )


# ------------------------------------------------------------------------------ data


def _check_data_path(path: Path) -> None:
    if path.suffix not in (".txt", ".jsonl"):
        raise FinetuneError(f"data file {str(path)!r} must end in .txt or .jsonl")
    if not path.is_file():
        raise FinetuneError(f"data file {str(path)!r} does not exist")


def _documents(path: Path, text_field: str) -> list[str | list[int]]:
    _check_data_path(path)
    if path.suffix == ".txt":
        return [path.read_text(encoding="utf-8")]
    docs: list[str | list[int]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FinetuneError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
            if isinstance(row, dict) and isinstance(row.get(text_field), str):
                docs.append(row[text_field])
            elif isinstance(row, dict) and isinstance(row.get("input_ids"), list):
                docs.append([int(t) for t in row["input_ids"]])
            else:
                raise FinetuneError(
                    f"{path}:{n}: each line must be an object with a string {text_field!r} "
                    "(see --text-field) or a list 'input_ids'"
                )
    return docs


class TokenWindows:
    """``seq_len``-token windows of a tokenized corpus in a seeded order per epoch.

    Args:
        tokens: ``[N]`` the corpus as one token stream.
        seq_len: window length.
        seed: the order of epoch ``e`` is a permutation drawn from ``seed + e``.
    """

    def __init__(self, tokens: torch.Tensor, seq_len: int, seed: int):
        self.num_windows = int(tokens.numel()) // seq_len
        if self.num_windows == 0:
            raise FinetuneError(
                f"the data has {tokens.numel()} tokens, fewer than one window of seq_len={seq_len}"
            )
        self.windows = tokens[: self.num_windows * seq_len].view(self.num_windows, seq_len)
        self.seed = seed
        self._orders: dict[int, torch.Tensor] = {}

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch not in self._orders:
            gen = torch.Generator().manual_seed(self.seed + epoch)
            self._orders = {epoch: torch.randperm(self.num_windows, generator=gen)}
        return self._orders[epoch]

    def batch(self, position: int, size: int) -> torch.Tensor:
        """Windows ``position .. position + size - 1`` of the endless sequence of epochs."""
        rows = []
        for i in range(position, position + size):
            epoch, j = divmod(i, self.num_windows)
            rows.append(self.windows[self._order(epoch)[j]])
        return torch.stack(rows)


def load_windows(config: FinetuneConfig, tokenizer: Any) -> TokenWindows:
    """Tokenize the corpus of ``config.data`` and cut it into windows."""
    docs = _documents(Path(config.data), config.text_field)
    eos = getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None
    stream: list[int] = []
    for doc in docs:
        if isinstance(doc, str):
            if tokenizer is None:
                raise FinetuneError("text data needs a tokenizer beside the model")
            stream.extend(tokenizer(doc, add_special_tokens=False)["input_ids"])
        else:
            stream.extend(doc)
        if eos is not None:
            stream.append(int(eos))
    return TokenWindows(torch.tensor(stream, dtype=torch.long), config.seq_len, config.seed)


# ----------------------------------------------------------------------------- model


def load_model_and_tokenizer(name: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """A local model directory through transformers, an embedded model through lc_agents."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if Path(name).is_dir():
        try:
            model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise FinetuneError(f"cannot load a model from {name!r}: {exc}") from exc
        try:
            tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
        except (OSError, ValueError):
            tokenizer = None  # pre-tokenized data needs none
        return model, tokenizer
    full = MODEL_ALIASES.get(name, name)
    try:
        from lc_agents.models import EMBEDDED_MODELS, load_model
    except ImportError as exc:
        raise FinetuneError(
            f"{name!r} is not a model directory; embedded models need lc-agents "
            "(pip install 'lc-train[agents]')"
        ) from exc
    if full not in EMBEDDED_MODELS:
        known = ", ".join([*MODEL_ALIASES, *EMBEDDED_MODELS])
        raise FinetuneError(f"{name!r} is neither a model directory nor one of: {known}")
    return load_model(full, dtype=dtype)


def _apply_lora(model: Any, config: FinetuneConfig) -> Any:
    """The model with LoRA adapters in its modules (:func:`lc_train.lora.apply_lora`)."""
    try:
        lora = apply_lora(
            model,
            rank=config.lora_rank,
            alpha=config.lora_alpha,
            seed=config.seed,
            task_type="CAUSAL_LM",
        )
    except ImportError as exc:
        raise FinetuneError("lora_rank > 0 needs peft (pip install 'lc-train[trl]')") from exc
    except ValueError as exc:
        raise FinetuneError(str(exc)) from exc
    return lora.get_base_model()  # adapters live in the modules


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that are trained (all of them, or the LoRA adapters)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


# ------------------------------------------------------------------------ checkpoints


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _save_checkpoint(
    out: Path,
    step: int,
    weights: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    scheduler: Any,
    config: FinetuneConfig,
    position: int,
    world_size: int = 1,
) -> Path:
    """Write a checkpoint of the trained ``weights`` (full tensors) and the
    ``optimizer_state`` atomically (a temporary directory renamed into place)."""
    from safetensors.torch import save_file

    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:07d}"
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(
        {n: t.contiguous().clone() for n, t in weights.items()}, str(tmp / "weights.safetensors")
    )
    torch.save(
        {
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict(),
            "rng": _rng_state(),
        },
        tmp / "state.pt",
    )
    meta = {
        "step": step,
        "data_position": position,
        "world_size": world_size,
        "config": asdict(config),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    (root / "latest.tmp").write_text(name)
    os.replace(root / "latest.tmp", root / "latest")
    kept = sorted(p for p in root.glob("step-*") if p.is_dir())
    for old in kept[: -config.keep_checkpoints]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(out: str | Path) -> Path | None:
    """The checkpoint ``out/checkpoints/latest`` points to, or ``None``."""
    pointer = Path(out) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "meta.json").is_file() else None


def _load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    config: FinetuneConfig,
    world_size: int = 1,
    sharded: bool = False,
) -> tuple[int, int]:
    from safetensors.torch import load_file

    meta = json.loads((path / "meta.json").read_text())
    saved = meta["config"]
    # a field a checkpoint of an older version lacks had its default value then
    diff = [
        f"{k}: checkpoint {saved.get(k, getattr(FinetuneConfig, k, None))!r}, "
        f"now {getattr(config, k)!r}"
        for k in _RUN_FIELDS
        if saved.get(k, getattr(FinetuneConfig, k, None)) != getattr(config, k)
    ]
    saved_world = int(meta.get("world_size", 1))
    if saved_world != world_size:  # the global batch is batch * world_size
        diff.append(f"world_size: checkpoint {saved_world}, now {world_size}")
    if diff:
        raise FinetuneError(
            f"cannot resume from {path}: the run settings differ ({'; '.join(diff)})"
        )
    params = dict(model.named_parameters())
    weights = load_file(str(path / "weights.safetensors"))
    missing = set(trainable_state(model)) - set(weights)
    if missing:
        raise FinetuneError(f"checkpoint {path} lacks trained parameters: {sorted(missing)[:5]}")
    state = torch.load(path / "state.pt", weights_only=False)
    if sharded:  # every rank reads the full tensors and keeps its shards
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, strict=False)
        set_model_state_dict(model, weights, options=options)  # type: ignore[arg-type]
        set_optimizer_state_dict(model, optimizer, state["optimizer"], options=options)
    else:
        with torch.no_grad():
            for name, value in weights.items():
                params[name].copy_(value)
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    return int(meta["step"]), int(meta["data_position"])


# -------------------------------------------------------------------------- training


def _schedule(config: FinetuneConfig) -> Any:
    def factor(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        span = max(1, config.steps - config.warmup)
        progress = min(1.0, (step - config.warmup) / span)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


@dataclass(frozen=True)
class FinetuneResult:
    """Outcome of :func:`finetune`.

    Attributes:
        steps_done: the step the run stopped at (``config.steps`` unless stopped early).
        losses: ``{step: mean loss}`` of the steps run in this call.
        checkpoint: the last checkpoint written, if any.
        model: the trained model (with LoRA adapters merged into its modules, unmerged;
            sharded with FSDP2 under ``torchrun`` with ``fsdp=True``).
    """

    steps_done: int
    losses: dict[int, float]
    checkpoint: Path | None
    model: Any


def finetune(
    config: FinetuneConfig,
    *,
    model: Any = None,
    tokenizer: Any = None,
    stop_after: int | None = None,
    progress: bool = True,
) -> FinetuneResult:
    """Fine-tune with chunk-recurrent exact gradients; checkpoint and resume.

    Args:
        config: the run.
        model: an already-built model to train instead of loading ``config.model``
            (``config.model`` is still recorded in checkpoints).
        tokenizer: its tokenizer (needed for text data).
        stop_after: stop once this step is done (as if interrupted; for tests and for
            splitting a run across jobs).
        progress: show a progress bar.

    Returns:
        The steps done, the per-step losses, the last checkpoint and the model.

    Raises:
        FinetuneError: unusable data, model or checkpoint (with the reason).

    Example:
        >>> cfg = FinetuneConfig(model="smollm2", data="book.txt", out="run", seq_len=8192,
        ...                      chunk=1024, steps=200, save_every=50)
        >>> finetune(cfg).steps_done
        200
    """
    from tqdm.auto import tqdm

    out = Path(config.out)
    _check_data_path(Path(config.data))  # before the (slow) model load
    previous = latest_checkpoint(out)
    if config.resume and previous is None:
        raise FinetuneError(f"--resume: no checkpoint in {out / 'checkpoints'}")
    if not config.resume and previous is not None:
        raise FinetuneError(
            f"{out} already holds checkpoints (latest {previous.name}); pass --resume to "
            "continue that run or choose another --out"
        )
    full = MODEL_ALIASES.get(config.model, config.model)
    if model is None and full in UNSUPPORTED_EMBEDDED and not Path(config.model).is_dir():
        raise FinetuneError(f"{config.model!r}: {UNSUPPORTED_EMBEDDED[full]}")
    created = _init_distributed(config)
    try:
        return _run(config, out, previous, model, tokenizer, stop_after, progress, tqdm)
    finally:
        if created:
            import gc

            import torch.distributed as dist

            # Free the (cyclic) sharded model now: tensors still referenced by finished
            # gloo work must not outlive the interpreter, or a rank aborts at exit.
            gc.collect()
            dist.barrier()  # no rank tears the group down while a peer still uses it
            dist.destroy_process_group()


def _init_distributed(config: FinetuneConfig) -> bool:
    """Join the ``torchrun`` process group (``WORLD_SIZE > 1``) unless one exists: gloo
    on CPU, NCCL on CUDA. Returns whether this call created it."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return False
    cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    return True


def _run(
    config: FinetuneConfig,
    out: Path,
    previous: Path | None,
    model: Any,
    tokenizer: Any,
    stop_after: int | None,
    progress: bool,
    tqdm: Any,
) -> FinetuneResult:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from lc_train.oomb.trainer import chunk_recurrent_backward

    distributed = dist.is_initialized() and dist.get_world_size() > 1
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    dtype = getattr(torch, config.dtype)
    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu")
        if config.device == "auto"
        else config.device
    )
    if device.type == "cuda" and distributed:
        device = torch.device("cuda", torch.cuda.current_device())
    sharded = config.fsdp and distributed
    if model is None:
        model, tokenizer = load_model_and_tokenizer(config.model, dtype)
    try:  # e.g. a local directory of an unsupported family
        check_model(model)
    except ValueError as exc:
        raise FinetuneError(str(exc)) from exc
    windows = load_windows(config, tokenizer)
    torch.manual_seed(config.seed)
    if config.lora_rank:
        model = _apply_lora(model, config)
    else:
        model.requires_grad_(True)
    model.to(device)
    model.train()
    if sharded:  # before the optimizer, which then holds the shards
        _fully_shard(model, device, world)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
    step, position = 0, 0
    if previous is not None:
        step, position = _load_checkpoint(
            previous, model, optimizer, scheduler, config, world_size=world, sharded=sharded
        )
    # DDP broadcasts rank 0's weights; chunk_recurrent_backward averages the gradients
    # (FSDP: every rank built the same weights; their gradients are reduce-scattered)
    trained = (
        DistributedDataParallel(
            model, device_ids=[device.index] if device.index is not None else None
        )
        if distributed and not sharded
        else model
    )
    lead = rank == 0
    if lead:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(asdict(config), indent=2))
    chunk_cfg = config.chunk_config()
    losses: dict[int, float] = {}
    last_ckpt = previous
    end = config.steps if stop_after is None else min(config.steps, stop_after)
    bar = tqdm(
        total=config.steps, initial=step, disable=not (progress and lead), desc="oomb-finetune"
    )
    log = (out / "log.jsonl").open("a") if lead else None
    try:
        while step < end:
            t0 = time.perf_counter()
            # the global batch is `batch * world` windows; rank r takes its r-th share
            ids = windows.batch(position + rank * config.batch, config.batch).to(device)
            optimizer.zero_grad(set_to_none=True)
            result = chunk_recurrent_backward(trained, ids, config=chunk_cfg)
            norm = (
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                if config.grad_clip
                else torch.tensor(float("nan"))
            )
            if hasattr(norm, "full_tensor"):  # FSDP: a DTensor of the global norm
                norm = norm.full_tensor()
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            step += 1
            position += config.batch * world
            mean_loss = result.loss.detach().clone()
            if distributed:
                dist.all_reduce(mean_loss)
                mean_loss /= world
            loss = float(mean_loss)
            losses[step] = loss
            if log is not None:
                row = {
                    "step": step,
                    "loss": loss,
                    "lr": lr,
                    "grad_norm": float(norm),
                    "tokens_per_s": ids.numel() * world / (time.perf_counter() - t0),
                }
                log.write(json.dumps(row) + "\n")
                log.flush()
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
            if step % config.save_every == 0 or step == config.steps:
                # gathering FSDP shards is collective: every rank takes part
                weights, optimizer_state = _full_states(model, optimizer, sharded)
                if lead:
                    last_ckpt = _save_checkpoint(
                        out, step, weights, optimizer_state, scheduler, config, position, world
                    )
                else:
                    last_ckpt = out / "checkpoints" / f"step-{step:07d}"
    finally:
        if log is not None:
            log.close()
    bar.close()
    if step == config.steps:
        full = _full_model_state(model) if sharded else None
        if lead:
            _save_final(out / "final", model, tokenizer, config, full)
    return FinetuneResult(step, losses, last_ckpt, model)


def _fully_shard(model: Any, device: torch.device, world: int) -> None:
    """FSDP2 over all ranks: every decoder layer is one unit, the model the root (which
    holds the embedding, final norm and LM head)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,))
    layers = getattr(model.get_decoder(), "layers", None)
    if layers is None:
        raise FinetuneError(
            f"--fsdp: {type(model).__name__} has no decoder layers at get_decoder().layers"
        )
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _full_model_state(model: Any) -> dict[str, torch.Tensor]:
    """The full state dict of an FSDP model on rank 0 (empty elsewhere); collective."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)  # type: ignore[return-value]


def _full_states(
    model: Any, optimizer: torch.optim.Optimizer, sharded: bool
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Trained weights and optimizer state as full tensors (FSDP: gathered to rank 0,
    a collective call; the other ranks get empty dicts)."""
    if not sharded:
        return trainable_state(model), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
    )

    names = {n for n, p in model.named_parameters() if p.requires_grad}
    full = _full_model_state(model)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    optimizer_state = get_optimizer_state_dict(model, optimizer, options=options)
    return {n: t for n, t in full.items() if n in names}, optimizer_state


def _save_final(
    path: Path,
    model: Any,
    tokenizer: Any,
    config: FinetuneConfig,
    full: dict[str, torch.Tensor] | None = None,
) -> None:
    """The trained model: ``save_pretrained`` for full fine-tuning, the adapters (as a
    safetensors file of LoRA parameters) for LoRA. ``full``: the gathered state dict
    of an FSDP model."""
    path.mkdir(parents=True, exist_ok=True)
    if config.lora_rank:
        from safetensors.torch import save_file

        names = trainable_state(model)
        weights = names if full is None else {n: full[n] for n in names}
        save_file(
            {n: t.contiguous().clone() for n, t in weights.items()},
            str(path / "adapter.safetensors"),
        )
    else:
        model.save_pretrained(path, state_dict=full)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)


__all__ = [
    "MODEL_ALIASES",
    "FinetuneConfig",
    "FinetuneError",
    "FinetuneResult",
    "TokenWindows",
    "finetune",
    "latest_checkpoint",
    "load_windows",
]

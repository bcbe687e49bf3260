"""SoLoPO as a subclass of TRL's ``DPOTrainer``.

What TRL does here (unchanged): tokenization of the prompt/chosen/rejected columns
(plain text or chat messages), the padding collator, the reference model (a separate
model, the PEFT base with adapters disabled, or precomputed log-probabilities), LoRA
wrapping from a ``peft_config``, the training loop with checkpointing and resuming
(``transformers.Trainer``), data parallelism through ``accelerate`` (``torchrun``), and
the fused LM head that returns per-token log-probabilities without materializing the
``[batch, seq, vocab]`` logits.

What this module adds:

- a ``long_prompt`` column (the long-context twin of ``prompt``), tokenized the same
  way and validated: it must contain the short prompt's paragraphs in order and the
  responses must tokenize to the same ids after either prompt;
- a collator that pads the long twins of the chosen (and, unless ``chosen_only``, the
  rejected) responses next to TRL's short-context batch;
- the loss: :func:`~lc_train.preference.losses.solopo_loss` (short-context DPO, SimPO or
  ORPO plus SoLo-RA) in place of TRL's DPO loss, with the long-context reference
  log-probabilities precomputed when ``precompute_ref_log_probs=True``.

Example:
    >>> from datasets import Dataset  # doctest: +SKIP
    >>> from peft import LoraConfig  # doctest: +SKIP
    >>> from trl import DPOConfig  # doctest: +SKIP
    >>> rows = [{"prompt": "The code is 7.\\n\\nWhat is the code?\\n",
    ...          "long_prompt": "Noise.\\n\\nThe code is 7.\\n\\nMore noise.\\n\\nWhat is the code?\\n",
    ...          "chosen": "7", "rejected": "3"}]  # doctest: +SKIP
    >>> trainer = SoLoPOTrainer(model, args=DPOConfig("out", max_steps=10),
    ...     solopo=SoLoPOConfig(method="dpo", alignment_weight=1.0),
    ...     train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
    ...     peft_config=LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))  # doctest: +SKIP
    >>> trainer.train()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accelerate.utils import is_peft_model
from datasets import Dataset
from trl import DPOConfig, DPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.dpo_trainer import DataCollatorForPreference
from trl.trainer.utils import use_adapter

from lc_train.preference.data import _is_subsequence
from lc_train.preference.losses import ResponseLogps, SoLoPOConfig, solopo_loss

LONG_PROMPT = "long_prompt"
"""Name of the dataset column holding the long-context twin of ``prompt``."""

_LONG_KEYS = ("long_input_ids", "long_attention_mask", "long_completion_mask")
_REF_LONG = ("ref_long_chosen_logps", "ref_long_rejected_logps")


def _text(value: Any) -> str:
    """The text of a prompt or response: a string or a list of chat messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return "\n\n".join(str(m["content"]) for m in value if isinstance(m, Mapping))
    raise ValueError(f"expected a string or a list of chat messages, got {type(value).__name__}")


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def check_solopo_rows(rows: Dataset | Sequence[Mapping[str, Any]], name: str = "train") -> None:
    """Validate SoLoPO rows before tokenization.

    Every row needs ``prompt``, ``long_prompt``, ``chosen`` and ``rejected`` (strings or
    chat-message lists); responses must not be empty; the long prompt must contain the
    short prompt's paragraphs (blank-line separated) in the same order.

    Raises:
        ValueError: naming the dataset, the row and what is wrong.
    """
    columns = rows.column_names if isinstance(rows, Dataset) else (list(rows[0]) if rows else [])
    missing = {"prompt", LONG_PROMPT, "chosen", "rejected"} - set(columns)
    if missing:
        raise ValueError(
            f"{name} dataset lacks column(s) {sorted(missing)}; SoLoPO rows need prompt, "
            f"{LONG_PROMPT}, chosen and rejected"
        )
    for i, row in enumerate(rows):
        for key in ("chosen", "rejected"):
            if not _text(row[key]).strip():
                raise ValueError(f"{name} dataset row {i}: the {key} response is empty")
        short, long = _paragraphs(_text(row["prompt"])), _paragraphs(_text(row[LONG_PROMPT]))
        if not _is_subsequence(short, long):
            raise ValueError(
                f"{name} dataset row {i}: {LONG_PROMPT} does not contain the short prompt's "
                "paragraphs in order (the long context must be the short one padded with "
                "irrelevant text)"
            )


def check_reference_model(model: torch.nn.Module, ref_model: torch.nn.Module) -> None:
    """Raise ``ValueError`` when ``ref_model`` cannot score the policy's tokens.

    Policy and reference must share the vocabulary (output embedding rows) and the
    model family, else their log-probabilities of the same ids are not comparable.
    """
    get = getattr
    vocab = get(model, "get_output_embeddings")().weight.shape[0]
    ref_vocab = get(ref_model, "get_output_embeddings")().weight.shape[0]
    if vocab != ref_vocab:
        raise ValueError(
            f"reference model mismatch: the policy has {vocab} output tokens, the reference "
            f"{ref_vocab}; DPO rewards need the same vocabulary"
        )
    kind = getattr(getattr(model, "config", None), "model_type", None)
    ref_kind = getattr(getattr(ref_model, "config", None), "model_type", None)
    if kind != ref_kind:
        raise ValueError(
            f"reference model mismatch: policy model_type {kind!r}, reference {ref_kind!r}"
        )


TRL_FLOOR = (1, 16)
"""First TRL release the trainer works with: 1.15 added the fused LM head (per-token
``log_probs`` on the model output) that the SoLoPO loss reads, but ran it only as a
Triton kernel on CUDA/XPU; 1.16 added its PyTorch path for other devices (CPU)."""


def _check_trl() -> None:
    """Refuse a TRL older than :data:`TRL_FLOOR`, or whose ``DPOTrainer`` lacks the
    fused LM head (per-token ``log_probs`` on the model output), which the loss reads."""
    import re

    import trl
    import trl.trainer.dpo_trainer as dpo

    release = tuple(int(x) for x in re.findall(r"\d+", trl.__version__)[:2])
    if release < TRL_FLOOR or not hasattr(dpo, "add_fused_lm_head"):
        raise ImportError(
            f"SoLoPOTrainer needs trl >= {'.'.join(map(str, TRL_FLOOR))} (a DPOTrainer "
            f"that returns fused LM-head log-probs on every device, add_fused_lm_head); "
            f"trl {trl.__version__} is installed: upgrade trl"
        )


@contextlib.contextmanager
def _no_reference_model(trainer: Any) -> Iterator[None]:
    """While ``DPOTrainer.__init__`` runs, build no reference model: SimPO and ORPO are
    reference-free. The policy itself (``model`` given as a path) is still loaded; the
    reference, created once the trainer holds its policy, is ``None``."""
    import trl.trainer.dpo_trainer as dpo

    original = getattr(dpo, "create_model_from_path", None)
    if original is None:  # another TRL layout: nothing to intercept
        yield
        return

    def create(path: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(trainer, "model", None) is not None:
            return None  # the reference (the policy exists already)
        return original(path, *args, **kwargs)

    dpo.create_model_from_path = create  # type: ignore[assignment]
    try:
        yield
    finally:
        dpo.create_model_from_path = original


@dataclass
class SoLoPODataCollator(DataCollatorForPreference):
    """TRL's preference collator plus the long-context twins.

    Returns TRL's keys (``input_ids``, ``attention_mask``, ``completion_mask``: chosen
    rows then rejected rows, ``[2 * batch, seq]``) and ``long_input_ids``,
    ``long_attention_mask``, ``long_completion_mask`` (``[batch, long_seq]`` chosen only,
    or ``[2 * batch, long_seq]`` chosen then rejected), right padded; plus precomputed
    reference log-probabilities ``ref_*_logps`` ``[batch]`` when the rows carry them.
    """

    chosen_only: bool = True

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().torch_call(examples)
        twins = [
            {
                "prompt_ids": e["long_prompt_ids"],
                "chosen_ids": e["chosen_ids"],
                "rejected_ids": e["chosen_ids"] if self.chosen_only else e["rejected_ids"],
            }
            for e in examples
        ]
        long = super().torch_call(twins)
        keep = len(examples) if self.chosen_only else 2 * len(examples)
        attention = long["attention_mask"][:keep]
        width = int(attention.sum(dim=0).nonzero().max()) + 1
        for key, src in zip(_LONG_KEYS, ("input_ids", "attention_mask", "completion_mask")):
            out[key] = long[src][:keep, :width]
        for key in _REF_LONG:
            if key in examples[0]:
                out[key] = torch.tensor([e[key] for e in examples])
        return out


class SoLoPOTrainer(DPOTrainer):
    """TRL's ``DPOTrainer`` with the SoLoPO objective.

    Args:
        model: policy (model object or path), as for ``DPOTrainer``.
        ref_model: optional frozen reference (DPO only); with PEFT, the base model
            (adapters disabled) is the reference, as in TRL. SimPO and ORPO are
            reference-free: no reference model is built or loaded for them.
        args: a ``trl.DPOConfig``; ``beta`` must equal ``solopo.beta``; ``loss_type``
            must be ``["sigmoid"]`` (the loss is ours, see :mod:`.losses`).
        solopo: base method (``dpo``, ``simpo``, ``orpo``) and SoLo-RA settings.
        train_dataset: rows with ``prompt``, ``long_prompt``, ``chosen``, ``rejected``
            (strings or chat-message lists); see :func:`check_solopo_rows`.
        eval_dataset: the same, optional.
        processing_class: tokenizer.
        callbacks: as for ``DPOTrainer``.
        optimizers: as for ``DPOTrainer``.
        peft_config: a peft config (e.g. ``LoraConfig``), as for ``DPOTrainer``.

    Metrics logged (besides TRL's ``loss``): ``solopo/preference``,
    ``solopo/alignment``, ``solopo/reward_margin`` and ``solopo/short_long_gap``.
    """

    _tag_names = ["trl", "dpo", "solopo"]  # noqa: RUF012 (TRL declares it an instance attribute)
    _name = "SoLoPO"

    def __init__(
        self,
        model: Any,
        ref_model: Any = None,
        args: DPOConfig | None = None,
        solopo: SoLoPOConfig | None = None,
        train_dataset: Dataset | None = None,
        eval_dataset: Dataset | None = None,
        processing_class: Any = None,
        callbacks: list[Any] | None = None,
        optimizers: tuple[Any, Any] = (None, None),
        peft_config: Any = None,
    ) -> None:
        _check_trl()
        solopo = solopo or SoLoPOConfig()
        args = args or DPOConfig(output_dir="solopo-output", beta=solopo.beta)
        if list(args.loss_type) != ["sigmoid"]:
            raise ValueError(
                f"SoLoPOTrainer computes its own loss; DPOConfig.loss_type must be ['sigmoid'], "
                f"got {args.loss_type}"
            )
        if abs(args.beta - solopo.beta) > 1e-12:
            raise ValueError(
                f"DPOConfig.beta={args.beta} and SoLoPOConfig.beta={solopo.beta} differ; set both "
                "to the same value"
            )
        if (
            args.ld_alpha is not None
            or args.use_weighting
            or args.f_divergence_type != "reverse_kl"
        ):
            raise ValueError(
                "SoLoPOTrainer supports plain DPO log-ratios only (ld_alpha=None, "
                "use_weighting=False, f_divergence_type='reverse_kl')"
            )
        if train_dataset is None:
            raise ValueError("train_dataset is required")
        for name, ds in (("train", train_dataset), ("eval", eval_dataset)):
            if ds is None:
                continue
            if not isinstance(ds, Dataset):
                raise ValueError(
                    f"SoLoPOTrainer needs a map-style datasets.Dataset for {name}, got "
                    f"{type(ds).__name__}"
                )
            check_solopo_rows(ds, name)
        if ref_model is not None:
            if isinstance(model, str) or isinstance(ref_model, str):
                raise ValueError("pass model objects (not paths) together with ref_model")
            check_reference_model(model, ref_model)
        self.solopo = solopo
        reference_free = solopo.method != "dpo" and ref_model is None
        with _no_reference_model(self) if reference_free else contextlib.nullcontext():
            super().__init__(
                model,
                ref_model=ref_model,
                args=args,
                train_dataset=train_dataset,
                eval_dataset=eval_dataset,
                processing_class=processing_class,
                callbacks=callbacks,
                optimizers=optimizers,
                peft_config=peft_config,
            )
        base = self.data_collator
        assert isinstance(base, DataCollatorForPreference)
        self._pad_token_id = base.pad_token_id
        self.data_collator = SoLoPODataCollator(
            pad_token_id=base.pad_token_id,
            max_length=None,  # lengths were checked in _prepare_dataset; never cut a response
            pad_to_multiple_of=base.pad_to_multiple_of,
            chosen_only=solopo.chosen_only,
        )
        if self.precompute_ref_logps and solopo.method == "dpo":
            self.train_dataset = self._precompute_long_ref(self.train_dataset)
            if isinstance(self.eval_dataset, Dataset):
                self.eval_dataset = self._precompute_long_ref(self.eval_dataset)

    # ------------------------------------------------------------------ data
    def _prepare_dataset(
        self, dataset: Any, processing_class: Any, args: Any, dataset_name: str
    ) -> Any:
        if "long_prompt_ids" in dataset.column_names:
            return dataset
        if LONG_PROMPT not in dataset.column_names:
            raise ValueError(f"{dataset_name} dataset lacks the {LONG_PROMPT!r} column")
        short = super()._prepare_dataset(
            dataset.remove_columns([LONG_PROMPT]), processing_class, args, dataset_name
        )
        twin = dataset.remove_columns(["prompt"]).rename_column(LONG_PROMPT, "prompt")
        long = super()._prepare_dataset(twin, processing_class, args, f"{dataset_name} (long)")
        if len(short) != len(long):
            raise ValueError(
                f"{dataset_name} dataset: max_length={args.max_length} drops some long prompts "
                "but not their short twins; raise max_length or set it to None"
            )
        for key in ("chosen_ids", "rejected_ids"):
            for i, (a, b) in enumerate(zip(short[key], long[key], strict=True)):
                if a != b:
                    raise ValueError(
                        f"{dataset_name} dataset row {i}: the {key[:-4]} response tokenizes "
                        "differently after the long prompt than after the short one; end both "
                        "prompts the same way (e.g. with a newline or a chat template)"
                    )
        long_prompt_ids = long["prompt_ids"]
        if args.max_length is not None:
            for i, (p, c, r) in enumerate(
                zip(long_prompt_ids, short["chosen_ids"], short["rejected_ids"], strict=True)
            ):
                if len(p) + max(len(c), len(r)) > args.max_length:
                    raise ValueError(
                        f"{dataset_name} dataset row {i}: the long sequence has "
                        f"{len(p) + max(len(c), len(r))} tokens, more than max_length="
                        f"{args.max_length}; truncation would cut the response"
                    )
        return short.add_column("long_prompt_ids", long_prompt_ids)

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        assert self._signature_columns is not None
        extra = [c for c in ("long_prompt_ids", *_REF_LONG) if c not in self._signature_columns]
        self._signature_columns = [*self._signature_columns, *extra]

    # --------------------------------------------------------------- log-probs
    @staticmethod
    def _summed_logps(
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        completion_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``([rows], [rows])``: summed completion log-probs and completion lengths."""
        labels = input_ids.masked_fill(completion_mask == 0, -100)
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            labels=labels,
            fused_lm_head=True,
            use_cache=False,
        )
        mask = completion_mask[:, 1:]
        per_token = out.log_probs[:, -mask.size(1) :].float()
        return (per_token * mask).sum(dim=1), mask.sum(dim=1)

    def _reference_logps(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_mask: torch.Tensor
    ) -> torch.Tensor:
        """Reference log-probs: the ref model, or the PEFT base with adapters disabled."""
        context: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        policy: Any = self.model
        checkpointing: Any = self.args.gradient_checkpointing_kwargs
        model: Any = self.ref_model
        if model is None:
            model = policy
            if is_peft_model(policy):
                unwrapped = self.accelerator.unwrap_model(self.model)
                name = "ref" if "ref" in unwrapped.peft_config else None
                context = use_adapter(unwrapped, adapter_name=name)
        with (
            torch.no_grad(),
            disable_gradient_checkpointing(policy, checkpointing),
            context,
        ):
            return self._summed_logps(model, input_ids, attention_mask, completion_mask)[0]

    def _precompute_long_ref(self, dataset: Dataset) -> Dataset:
        """Add ``ref_long_*_logps`` columns, computed once before training."""
        if _REF_LONG[0] in dataset.column_names:
            return dataset
        args: Any = self.args
        batch = args.precompute_ref_batch_size or args.per_device_train_batch_size
        device = self.accelerator.device
        chosen: list[float] = []
        rejected: list[float] = []
        collate = SoLoPODataCollator(pad_token_id=self._pad_token_id, chosen_only=False)
        for start in range(0, len(dataset), batch):
            rows = [dataset[i] for i in range(start, min(start + batch, len(dataset)))]
            b = collate(rows)
            logps = self._reference_logps(*(b[k].to(device) for k in _LONG_KEYS)).cpu()
            chosen += logps[: len(rows)].tolist()
            rejected += logps[len(rows) :].tolist()
        return dataset.add_column(_REF_LONG[0], chosen).add_column(_REF_LONG[1], rejected)

    # -------------------------------------------------------------------- loss
    def _compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool) -> Any:
        policy: Any = self.model
        mode = "train" if policy.training else "eval"
        cfg = self.solopo
        short = (inputs["input_ids"], inputs["attention_mask"], inputs["completion_mask"])
        long = tuple(inputs[k] for k in _LONG_KEYS)
        n = inputs["input_ids"].shape[0] // 2
        logps, lengths = self._summed_logps(model, *short)
        long_logps, long_lengths = self._summed_logps(model, *long)
        ref = ref_long = None
        if cfg.method == "dpo":
            if "ref_chosen_logps" in inputs:
                ref = torch.cat([inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]]).float()
            else:
                ref = self._reference_logps(*short)
            if _REF_LONG[0] in inputs:
                ref_long = torch.cat([inputs[_REF_LONG[0]], inputs[_REF_LONG[1]]]).float()
                ref_long = ref_long[: long_logps.shape[0]]
            else:
                ref_long = self._reference_logps(*long)

        def part(
            lp: torch.Tensor, ln: torch.Tensor, rf: torch.Tensor | None, rows: slice
        ) -> ResponseLogps:
            return ResponseLogps(lp[rows], ln[rows], None if rf is None else rf[rows])

        first, second = slice(0, n), slice(n, 2 * n)
        long_rejected = (
            None if cfg.chosen_only else part(long_logps, long_lengths, ref_long, second)
        )
        loss, metrics = solopo_loss(
            cfg,
            part(logps, lengths, ref, first),
            part(logps, lengths, ref, second),
            part(long_logps, long_lengths, ref_long, first),
            long_rejected,
        )
        for key, value in metrics.items():
            t = torch.tensor(value, device=loss.device)
            self._metrics[mode][f"solopo/{key}"].append(
                float(self.accelerator.gather_for_metrics(t).mean())
            )
        if return_outputs:
            return loss, {}
        return loss

"""Command line of lc-train.

    lc-train oomb-finetune --model smollm2 --data book.txt --seq-len 16384 --chunk 2048 \\
        --steps 200 --save-every 50 --out runs/book
    lc-train oomb-finetune ... --out runs/book --resume     # continue after an interruption
    torchrun --nproc_per_node 2 -m lc_train.cli oomb-finetune ... --fsdp   # sharded ranks
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lc-train", description="Long-context training.")
    sub = parser.add_subparsers(dest="command", required=True)
    ft = sub.add_parser(
        "oomb-finetune",
        help="fine-tune a causal LM on long windows with chunk-recurrent exact gradients",
        description=(
            "Fine-tune a causal LM (Llama, Mistral, Qwen2/3 families) on seq-len-token "
            "windows of a .txt or .jsonl corpus. Each step computes exact gradients "
            "chunk by chunk (activation memory of one chunk). Checkpoints every "
            "--save-every steps; --resume continues the run in --out."
        ),
    )
    ft.add_argument("--model", required=True, help="model directory, or smollm2 / gemma3")
    ft.add_argument("--data", required=True, help=".txt or .jsonl corpus")
    ft.add_argument("--out", required=True, help="output directory")
    ft.add_argument("--seq-len", type=int, default=4096, help="tokens per window")
    ft.add_argument("--chunk", type=int, default=1024, help="tokens per chunk")
    ft.add_argument("--page", type=int, default=128, help="tokens per KV page")
    ft.add_argument("--steps", type=int, default=100, help="optimizer steps of the run")
    ft.add_argument("--batch", type=int, default=1, help="windows per step")
    ft.add_argument("--lr", type=float, default=1e-5)
    ft.add_argument("--weight-decay", type=float, default=0.0)
    ft.add_argument("--warmup", type=int, default=0, help="linear warm-up steps")
    ft.add_argument("--grad-clip", type=float, default=1.0, help="0 disables clipping")
    ft.add_argument("--save-every", type=int, default=50, help="checkpoint interval (steps)")
    ft.add_argument("--keep-checkpoints", type=int, default=2)
    ft.add_argument("--seed", type=int, default=0)
    ft.add_argument("--text-field", default="text", help="text key of .jsonl lines")
    ft.add_argument("--lora-rank", type=int, default=0, help="0: train all weights")
    ft.add_argument("--lora-alpha", type=int, default=16)
    ft.add_argument("--offload", action="store_true", help="KV pages in host memory")
    ft.add_argument("--page-budget", type=int, default=None, help="sparse page budget")
    ft.add_argument(
        "--loss-chunk",
        type=int,
        default=512,
        help="positions whose LM-head logits exist at once (0: the whole chunk)",
    )
    ft.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ft.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ft.add_argument(
        "--fsdp",
        action="store_true",
        help="under torchrun: shard weights, gradients and optimizer state (FSDP2) "
        "instead of replicating them (DDP)",
    )
    ft.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    ft.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lc-train`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    from lc_train.oomb.finetune import FinetuneConfig, FinetuneError, finetune

    try:
        config = FinetuneConfig(
            model=args.model,
            data=args.data,
            out=args.out,
            seq_len=args.seq_len,
            chunk=args.chunk,
            page=args.page,
            steps=args.steps,
            batch=args.batch,
            lr=args.lr,
            weight_decay=args.weight_decay,
            warmup=args.warmup,
            grad_clip=args.grad_clip,
            save_every=args.save_every,
            keep_checkpoints=args.keep_checkpoints,
            seed=args.seed,
            text_field=args.text_field,
            lora_rank=args.lora_rank,
            lora_alpha=args.lora_alpha,
            offload=args.offload,
            page_budget=args.page_budget,
            loss_chunk=args.loss_chunk or None,
            dtype=args.dtype,
            device=args.device,
            fsdp=args.fsdp,
            resume=args.resume,
        )
        result = finetune(config, progress=not args.no_progress)
    except (ValueError, FinetuneError) as exc:
        print(f"lc-train oomb-finetune: error: {exc}", file=sys.stderr)
        return 2
    last = result.losses[max(result.losses)] if result.losses else float("nan")
    print(f"done: step {result.steps_done}/{config.steps}, last loss {last:.4f}, out {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

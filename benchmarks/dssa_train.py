"""Fine-tune SmolLM2-135M-Instruct with DSSA switched on (LoRA), then NIAH dense vs DSSA.

InfLLM-v2 reaches its retention by training the model with the sparse attention in
place; training-free, SmolLM2 loses needles at the published budget
(``docs/benchmarks/lc-attention-dssa/quality.json``: 5/10 at 4K against 8/10 dense).
This script runs the same short LoRA fine-tune twice, with the same items, steps, seed
and learning rate: once with the model's dense attention and once with DSSA
(``DSSAConfig.small(query_block=64)``, ``topk`` blocks of 64 keys). The items are
``lc_evals`` ``niah_single`` prompts (essay haystack, the RULER answer prefix of
``dssa_quality.py``) with seeds disjoint from the evaluation's; the loss is the
cross-entropy of the reply (value, full stop, end of turn) only.

With ``--data text`` the fine-tune sees general text instead, as InfLLM-v2 trains:
consecutive windows of Python's own documentation (``pydoc_data.topics``, shipped with
CPython), with the loss on the second half of each window; the evaluation adds the
perplexity of the documentation's last window, held out from training.

The base model and each adapter are then evaluated on the held-out items of
``dssa_quality.py`` (seeds ``0 .. n - 1``) with dense attention and with DSSA, greedy,
and by their perplexity on its essay text of the same length.
The dense-trained adapter under DSSA separates what DSSA training adds from what any
retrieval fine-tune adds.

Everything resumes: adapters are checkpointed every ``--save-every`` steps under
``--workdir`` and every evaluated item is written to the JSON at once. Two variants can
train in separate processes (``--train dense --n 0 --out other.json``); a later run
with both finds the adapters and their training logs in ``--workdir``.

    uv run python benchmarks/dssa_train.py --length 4096 --steps 20 --n 10 --threads 1
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import resource
import time
from typing import Any

import torch
from dssa_quality import _doc_tokens, _essay_ids, _niah_ids, _nll, _run, doc_window
from tqdm import tqdm

from lc_attention.dssa import DSSAConfig

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"
TRAIN_SEED0 = 100_000  # training items: seeds far from the evaluation's 0 .. n - 1
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _config(args: argparse.Namespace) -> DSSAConfig:
    return DSSAConfig.small(query_block=64, topk=args.topk)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run_dir(args: argparse.Namespace, variant: str) -> pathlib.Path:
    """Where a variant's checkpoint, adapter and training log live."""
    tail = "" if args.data == "niah" else f"_{args.data}"
    return args.workdir / f"{variant}_L{args.length}_k{args.topk}_s{args.steps}{tail}"


def text_loss(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the second half of ``ids`` (the positions
    where DSSA is sparse; the LM head runs on those only)."""
    half = ids.shape[1] // 2
    logits = model(input_ids=ids, logits_to_keep=half + 1).logits[0, :-1].float()
    return torch.nn.functional.cross_entropy(logits, ids[0, -half:])


def _with_lora(model: Any, args: argparse.Namespace) -> Any:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=LORA_TARGETS)
    return get_peft_model(model, lora)


def _adapter_state(model: Any) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if "lora_" in k}


def training_item(tok: Any, length: int, seed: int) -> tuple[torch.Tensor, int]:
    """``(ids [1, L], n_target)``: a NIAH prompt followed by its reply, whose last
    ``n_target`` tokens (value, full stop, end of turn) carry the loss."""
    prompt, answer = _niah_ids(tok, length, seed)
    reply = tok(f" {answer}.", add_special_tokens=False, return_tensors="pt").input_ids
    end = torch.tensor([[tok.eos_token_id]])
    target = torch.cat([reply, end], 1)
    return torch.cat([prompt, target], 1), target.shape[1]


def reply_loss(model: Any, ids: torch.Tensor, n_target: int) -> torch.Tensor:
    """Mean cross-entropy of the last ``n_target`` tokens; logits only where needed."""
    logits = model(input_ids=ids, logits_to_keep=n_target + 1).logits[0, :-1].float()
    return torch.nn.functional.cross_entropy(logits, ids[0, -n_target:])


def _hf_model(model: Any) -> Any:
    """The transformers model inside a peft wrapper (DSSA patches its attention)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def train(args: argparse.Namespace, variant: str, data: dict[str, Any]) -> pathlib.Path:
    """LoRA fine-tune with ``variant`` attention ("dense" or "dssa"); returns the adapter."""
    from peft import set_peft_model_state_dict

    from lc_agents.models import load_model

    run = _run_dir(args, variant)
    final = run / "adapter.pt"
    if final.exists():  # trained, maybe by a run that wrote another JSON: take its log
        if variant not in data.get("train", {}) and (run / "log.json").exists():
            data.setdefault("train", {})[variant] = json.loads((run / "log.json").read_text())
        return final
    run.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    model, tok = load_model("smollm2-135m-instruct")
    model = _with_lora(model, args)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    warm = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * s / args.steps))
    )
    log: dict[str, Any] = data.setdefault("train", {}).setdefault(variant, {"steps": []})
    ckpt = run / "checkpoint.pt"
    step0 = 0
    if ckpt.exists():  # resume: adapter, optimizer, schedule, the log so far
        state = torch.load(ckpt, weights_only=False)
        set_peft_model_state_dict(model, state["adapter"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step0, log["steps"] = state["step"], state["log"]
    cfg = _config(args) if variant == "dssa" else None
    hf = _hf_model(model)
    # activations of 30 layers at 4K tokens take 12-15 GB: recompute them per layer
    hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    bar = tqdm(range(step0, args.steps), desc=f"train {variant}", initial=step0, total=args.steps)
    for step in bar:
        if args.data == "niah":
            ids, n_target = training_item(tok, args.length, TRAIN_SEED0 + step)
        else:
            ids, n_target = doc_window(tok, args.length, step), 0
        t0 = time.process_time()

        def forward_backward(ids: torch.Tensor = ids, n: int = n_target) -> torch.Tensor:
            loss = reply_loss(model, ids, n) if n else text_loss(model, ids)
            loss.backward()  # inside DSSA too: checkpointed layers recompute their forward
            return loss.detach()

        loss = _run(hf, cfg, forward_backward)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        log["steps"].append(
            {"step": step + 1, "loss": round(float(loss), 4), "cpu_s": time.process_time() - t0}
        )
        bar.set_postfix(loss=f"{float(loss):.3f}")
        if (step + 1) % args.save_every == 0 or step + 1 == args.steps:
            state = {
                "adapter": _adapter_state(model),
                "opt": opt.state_dict(),
                "sched": sched.state_dict(),
            }
            torch.save(state | {"step": step + 1, "log": log["steps"]}, ckpt)
            _save(args, data)
    log.update(
        data=args.data,
        attention=variant,
        dssa=None if cfg is None else cfg.__dict__,
        length=args.length,
        lr=args.lr,
        rank=args.rank,
        lora_targets=LORA_TARGETS,
        trainable_params=sum(p.numel() for p in params),
        cpu_s_per_step=sum(s["cpu_s"] for s in log["steps"]) / max(1, len(log["steps"])),
        peak_rss_mib=_peak_rss_mib(),
    )
    torch.save(_adapter_state(model), final)
    (run / "log.json").write_text(json.dumps(log, indent=1))
    _save(args, data)
    return final


def _load_weights(args: argparse.Namespace, weights: str) -> tuple[Any, Any]:
    """The base model, or the base model with a trained adapter merged in."""
    from lc_agents.models import load_model

    model, tok = load_model("smollm2-135m-instruct")
    if weights == "base":
        return model, tok
    path = _run_dir(args, weights) / "adapter.pt"
    model = _with_lora(model, args)
    missing = model.load_state_dict(torch.load(path), strict=False)
    if any("lora_" in k for k in missing.missing_keys):
        raise RuntimeError(f"{path} does not hold every LoRA weight")
    return model.merge_and_unload(), tok


@torch.no_grad()
def evaluate(args: argparse.Namespace, weights: str, data: dict[str, Any]) -> None:
    """NIAH on the held-out items with each attention mode; written item by item."""
    model, tok = _load_weights(args, weights)
    model.eval()
    cfgs = {"dense": None, "dssa": _config(args)}
    for mode in args.eval_modes:
        row = data.setdefault("eval", {}).setdefault(f"{weights}/{mode}", {"items": []})
        if "ppl" not in row:  # the essay text of dssa_quality.py at this length
            text = _essay_ids(tok, args.eval_length, 1000)
            nll = _run(model, cfgs[mode], lambda text=text: _nll(model, text))
            row["ppl"] = math.exp(float(nll.mean()))
            if args.data == "text":  # and the held-out last window of the documentation
                doc = doc_window(tok, args.eval_length, -1)
                nll = _run(model, cfgs[mode], lambda doc=doc: _nll(model, doc))
                row["ppl_doc"] = math.exp(float(nll.mean()))
                row["ppl_doc_second_half"] = math.exp(float(nll[nll.shape[0] // 2 :].mean()))
            _save(args, data)
        done = {it["seed"] for it in row["items"]}
        for seed in tqdm(range(args.n), desc=f"NIAH {weights}/{mode}"):
            if seed in done:
                continue
            ids, answer = _niah_ids(tok, args.eval_length, seed)
            t0 = time.perf_counter()
            out = _run(
                model,
                cfgs[mode],
                lambda ids=ids: model.generate(
                    ids, max_new_tokens=args.max_new, do_sample=False, pad_token_id=tok.eos_token_id
                ),
            )
            text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            row["items"].append(
                {
                    "seed": seed,
                    "reply": text,
                    "hit": answer in text,
                    "seconds": time.perf_counter() - t0,
                }
            )
            row["items"].sort(key=lambda it: it["seed"])
            row.update(
                n=len(row["items"]),
                hits=sum(it["hit"] for it in row["items"]),
            )
            _save(args, data)


def _save(args: argparse.Namespace, data: dict[str, Any]) -> None:
    data["model"] = "SmolLM2-135M-Instruct (embedded, float32)"
    data["machine"] = f"{platform.machine()}, {args.threads} threads, CPU (shared)"
    data["dssa"] = _config(args).__dict__
    data["length"] = args.length
    data["data"] = args.data
    data["eval_length"] = args.eval_length
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2))


def plot(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Training-loss curves and NIAH hits per weights and attention mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.3))
    k = 1
    for variant, log in data.get("train", {}).items():
        xs = [s["step"] for s in log["steps"]]
        ys = [s["loss"] for s in log["steps"]]
        k = max(1, len(ys) // 10)  # moving average: one item per step is noisy
        smooth = [
            sum(ys[max(0, i - k + 1) : i + 1]) / len(ys[max(0, i - k + 1) : i + 1])
            for i in range(len(ys))
        ]
        ax0.plot(xs, smooth, label=f"trained with {variant}")
    ax0.set_xlabel("step")
    what = "reply loss" if args.data == "niah" else "text loss, second half"
    ax0.set_ylabel(f"{what} (moving mean of {k})")
    ax0.legend()
    rows = data.get("eval", {})
    present = {key.split("/")[0] for key in rows}
    weights = [w for w in ("base", "dense", "dssa") if w in present]
    modes = list(dict.fromkeys(key.split("/")[1] for key in rows))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        acc = [
            rows[f"{w}/{mode}"]["hits"] / rows[f"{w}/{mode}"]["n"] if f"{w}/{mode}" in rows else 0
            for w in weights
        ]
        ax1.bar([i + j * width for i in range(len(weights))], acc, width, label=f"{mode} attention")
    ax1.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(weights))])
    ax1.set_xticklabels([w if w == "base" else f"{w}-trained" for w in weights])
    ax1.set_ylabel(f"NIAH accuracy at {args.eval_length}")
    ax1.set_ylim(0, 1.3)
    ax1.legend(loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=4096, help="tokens per item")
    ap.add_argument(
        "--eval-length", type=int, default=None, help="held-out items' tokens (default: --length)"
    )
    ap.add_argument("--steps", type=int, default=20, help="training items (one per step)")
    ap.add_argument(
        "--data",
        choices=["niah", "text"],
        default="niah",
        help="niah: NIAH items, loss on the reply; text: windows of Python's documentation, "
        "loss on their second half",
    )
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--rank", type=int, default=16, help="LoRA rank")
    ap.add_argument("--topk", type=int, default=16, help="DSSA blocks per query group")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", nargs="*", default=["dense", "dssa"], choices=["dense", "dssa"])
    ap.add_argument("--n", type=int, default=10, help="held-out NIAH items (0: train only)")
    ap.add_argument("--eval-modes", nargs="*", default=["dense", "dssa"], choices=["dense", "dssa"])
    ap.add_argument(
        "--eval-weights",
        nargs="*",
        default=None,
        choices=["base", "dense", "dssa"],
        help="weights to evaluate, in order (default: base, then the --train variants)",
    )
    ap.add_argument("--max-new", type=int, default=10)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--workdir",
        type=pathlib.Path,
        default=pathlib.Path.home() / ".cache/lc-attention/dssa_train",
    )
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "train_4k.json")
    args = ap.parse_args()
    args.eval_length = args.eval_length or args.length
    if args.steps < 1 or args.n < 0 or min(args.length, args.eval_length) < 1024:
        raise SystemExit(
            "--steps must be >= 1, --n >= 0 and --length, --eval-length >= 1024 (DSSA's dense_len)"
        )
    if args.eval_weights is None:
        args.eval_weights = ["base", *args.train]
    if args.data == "text":  # the held-out window must lie after every training window
        from lc_agents.models import load_tokenizer

        n_eval = _doc_tokens(load_tokenizer("smollm2-135m-instruct")).shape[0] // args.eval_length
        if args.steps * args.length > (n_eval - 1) * args.eval_length:
            raise SystemExit(
                f"--data text: {args.steps} windows of {args.length} tokens reach the held-out "
                f"last window of {args.eval_length}; use fewer steps or shorter windows"
            )
    torch.set_num_threads(args.threads)
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    t0 = time.perf_counter()
    for variant in args.train:
        train(args, variant, data)
    for weights in args.eval_weights if args.n else []:
        evaluate(args, weights, data)
    data["wall_s_last_run"] = time.perf_counter() - t0
    _save(args, data)
    plot(args, data)
    print(
        json.dumps({k: {"n": v["n"], "hits": v["hits"]} for k, v in data.get("eval", {}).items()})
    )


if __name__ == "__main__":
    main()

"""Peak resident memory and time of MemAgent's reading loop from 64K to 3.5M tokens.

Each length runs in a fresh process (so peak RSS is that run's): the document is
streamed from a generator of Python-documentation paragraphs through
:func:`lc_agents.memagent.agent.iter_token_chunks` with the real Qwen2.5-Coder
tokenizer, and MemAgent reads it with a stand-in backend (named as such: it replies
``none`` at once, so the numbers are the agent's own cost, not a model's). The same run
also measures the old way, tokenizing the whole document at once, for comparison.

Writes ``docs/benchmarks/lc-agents/memagent_resources.json`` and ``.png``.

    uv run python packages/lc-agents/benchmarks/memagent_resources.py
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import subprocess
import sys
import time
from typing import Any

OUT = pathlib.Path(__file__).resolve().parents[3] / "docs/benchmarks/lc-agents"
LENGTHS = (65_536, 524_288, 3_500_000)


def _paragraphs() -> list[str]:
    import pydoc_data.topics

    return [p for v in pydoc_data.topics.topics.values() for p in v.split("\n\n") if p.strip()]


def document(tokens: int) -> Any:
    """About ``tokens`` tokens of documentation text, yielded paragraph by paragraph."""
    paras = _paragraphs()
    chars = tokens * 4  # about four characters per token on this text
    made = i = 0
    while made < chars:
        p = paras[i % len(paras)] + "\n\n"
        made += len(p)
        i += 1
        yield p


class NoneBackend:
    """Stand-in chat backend (no model): every memory update replies ``none``."""

    def chat(self, messages: Any, **_: Any) -> str:
        return "none"

    async def achat(self, messages: Any, **o: Any) -> str:
        return "none"

    def chat_batch(self, conversations: Any, **o: Any) -> list[str]:
        return ["none" for _ in conversations]


def child(tokens: int, mode: str) -> dict[str, Any]:
    import resource

    from lc_agents.memagent import MemAgent, MemAgentConfig
    from lc_agents.models import QWEN_MODEL, load_tokenizer

    tok = load_tokenizer(QWEN_MODEL)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    if mode == "stream":
        agent = MemAgent(NoneBackend(), MemAgentConfig.notes(), tokenizer=tok)
        result = agent.run(document(tokens), "Where does Tobin Asher work?")
        n_tokens, n_chunks = result.document_tokens, result.n_chunks
    else:  # the whole text in memory and tokenized at once
        text = "".join(document(tokens))
        ids = tok.encode(text, add_special_tokens=False)
        n_tokens, n_chunks = len(ids), -(-len(ids) // 5000)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "mode": mode,
        "target_tokens": tokens,
        "tokens": n_tokens,
        "chunks": n_chunks,
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(peak, 1),
        "rss_before_mib": round(base, 1),
        "tokens_per_s": round(n_tokens / seconds),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    p.add_argument("--modes", nargs="+", default=["stream", "whole"], choices=["stream", "whole"])
    p.add_argument("--child", nargs=2, metavar=("TOKENS", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=pathlib.Path, default=OUT)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return
    rows = []
    for tokens in args.lengths:
        for mode in args.modes:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(tokens), mode],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1])
            rows.append(row)
            print(row, flush=True)
    stream = [r for r in rows if r["mode"] == "stream"]
    growth = stream[-1]["peak_rss_mib"] - stream[0]["peak_rss_mib"] if len(stream) > 1 else None
    summary = {
        "benchmark": "memagent_resources",
        "machine": f"{platform.machine()} CPU",
        "backend": "stand-in (replies none; measures the agent, not a model)",
        "tokenizer": "qwen2.5-coder-0.5b-instruct",
        "rows": rows,
        "stream_peak_rss_growth_mib": growth,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memagent_resources.json").write_text(json.dumps(summary, indent=1) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for mode in args.modes:
        rs = [r for r in rows if r["mode"] == mode]
        a.plot([r["tokens"] for r in rs], [r["peak_rss_mib"] for r in rs], "o-", label=mode)
        b.plot([r["tokens"] for r in rs], [r["seconds"] for r in rs], "o-", label=mode)
    for ax, label in ((a, "peak RSS (MiB)"), (b, "seconds")):
        ax.set_xscale("log")
        ax.set_xlabel("document tokens")
        ax.set_ylabel(label)
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "memagent_resources.png", dpi=120)


if __name__ == "__main__":
    main()

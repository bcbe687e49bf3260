"""Question answering over real prose: MemAgent against RAG, whole-document prompts and
the sentence-scoring memory, side by side on the same lc-evals ``docqa`` items.

Items: lc-evals ``docqa_<kind>`` (Python's own documentation as the haystack, invented
facts planted in it) for five kinds: ``single``, ``reworded`` (no content word shared
with the fact), ``absent`` (the right reply is to abstain), ``two_hop`` (two facts at
least 40% of the document apart) and ``count``.

Methods (each answers every item; the model is named in the method):

* ``memagent:<model>``: MemAgent's ``notes`` preset: the model rewrites a bounded memory
  in its own words chunk by chunk and answers from it, abstaining when it holds nothing;
* ``paper:<model>``: MemAgent with the paper's prompt templates;
* ``whole:<model>``: the whole document in one prompt (only where it fits the model's
  window), lc-evals' ``DOCQA_TEMPLATE``;
* ``rag:<model>``: BM25 top-k passages of the document in document order, same template;
* ``evidence:<model>``: MemAgent's ``evidence`` preset (scored sentences found by shared
  words, by meaning through the embedded MiniLM, and by following names; a generated
  answer grounded in the memory); ``evidence-0.7:<model>`` rows are the same preset as
  lc-agents 0.7 had it (no recall by meaning, no grounding), kept for comparison;
* ``sentences:<model>``: MemAgent's ``sentences`` preset (verbatim sentences chosen by
  question likelihood; no abstention), the former default on SmolLM2.

Each MemAgent record carries the hash of the agent's configuration (``config``); a rerun
refuses to mix records of another configuration under one method name.

Scoring is lc-evals' ``score_docqa`` (abstention is right only on absent items). Each
record is appended to ``docqa_records.jsonl`` as soon as it is measured and a rerun skips
what is there, so an interrupted run resumes. The summary (``docqa.json``) holds accuracy
with a Wilson 95% interval per (method, kind, length), mean seconds per item and the
process's resident memory; ``docqa.png`` plots it.

    uv run python packages/lc-agents/benchmarks/docqa.py --lengths 4096 --n 4 \\
        --methods memagent:qwen2.5-coder-0.5b-instruct whole:qwen2.5-coder-0.5b-instruct \\
        rag:qwen2.5-coder-0.5b-instruct sentences:smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import platform
import re
import time
from collections import defaultdict
from typing import Any

from lc_evals.report import wilson_interval

OUT = pathlib.Path(__file__).resolve().parents[3] / "docs/benchmarks/lc-agents"
KINDS = ("single", "reworded", "absent", "two_hop", "count")
METHOD_KINDS = ("memagent", "paper", "whole", "rag", "sentences", "evidence")
QWEN = "qwen2.5-coder-0.5b-instruct"
DEFAULT_METHODS = (
    f"memagent:{QWEN}",
    f"whole:{QWEN}",
    f"rag:{QWEN}",
    "sentences:smollm2-135m-instruct",
)
TARGETS = {
    "single": "MemAgent (Qwen-0.5B) >= 90%",
    "reworded": "MemAgent (Qwen-0.5B) >= 90%",
    "absent": "MemAgent (Qwen-0.5B) >= 90% correct abstention",
    "two_hop": "MemAgent >= BM25-RAG + 15 points",
    "count": "MemAgent within 5 points of whole-document at 16K",
}


def rss_mib() -> float:
    """Current resident memory of this process (MiB)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def passages(text: str, words: int = 150) -> list[str]:
    """The document cut into passages of about ``words`` words at sentence ends."""
    sentences = re.split(r"(?<=[.!?])\s+|\n{2,}", text)
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for s in sentences:
        if not s.strip():
            continue
        cur.append(s.strip())
        size += len(s.split())
        if size >= words:
            out.append(" ".join(cur))
            cur, size = [], 0
    if cur:
        out.append(" ".join(cur))
    return out


class Runner:
    """Loads each model once and answers items with a named method."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.backends: dict[str, Any] = {}

    def backend(self, model: str) -> Any:
        if model not in self.backends:
            import torch

            from lc_agents.backends.local import LocalBackend

            dtype = torch.bfloat16 if self.args.device.startswith("cuda") else torch.float32
            backend = LocalBackend(model, max_tokens=64, device=self.args.device)
            backend.model.to(dtype)
            self.backends[model] = backend
        return self.backends[model]

    def answer(self, method: str, item: Any) -> dict[str, Any]:
        kind, model = method.split(":", 1)
        backend = self.backend(model)
        if kind in ("memagent", "paper", "sentences", "evidence"):
            return self._memagent(kind, backend, item)
        if kind == "whole":
            return self._prompt(backend, item.context, item)
        if kind == "rag":
            from lc_agents.code.bm25 import BM25Index

            parts = passages(item.context)
            top = BM25Index(parts).top(item.question, k=self.args.rag_k)
            chosen = sorted(i for i, _ in top)
            return self._prompt(backend, "\n\n".join(parts[i] for i in chosen), item)
        raise ValueError(f"unknown method {method!r}")

    def config(self, kind: str) -> Any:
        """The MemAgent configuration of a method kind."""
        from lc_agents.memagent import MemAgentConfig

        a = self.args
        if kind == "memagent":
            return MemAgentConfig.notes(a.chunk_tokens, a.memory_tokens)
        if kind == "paper":
            return MemAgentConfig.paper(a.chunk_tokens, a.memory_tokens)
        if kind == "evidence":
            return MemAgentConfig.evidence()
        return MemAgentConfig.sentences()

    def config_id(self, method: str) -> str | None:
        """Short hash of a MemAgent method's configuration (None for other methods).

        Only the fields that differ from ``MemAgentConfig()``'s defaults count, so a new
        field whose default keeps the old behaviour does not change the hash."""
        from lc_agents.memagent import MemAgentConfig

        kind = method.split(":", 1)[0]
        if kind not in ("memagent", "paper", "sentences", "evidence"):
            return None
        default = MemAgentConfig().fingerprint_fields()
        fields = {
            k: v for k, v in self.config(kind).fingerprint_fields().items() if default[k] != v
        }
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]

    def _memagent(self, kind: str, backend: Any, item: Any) -> dict[str, Any]:
        from lc_agents.memagent import MemAgent

        result = MemAgent(backend, self.config(kind)).run(item.context, item.question)
        return {
            "prediction": result.answer,
            "found": result.found,
            "sources": list(result.sources),
            "chunks": result.n_chunks,
            "memory": result.memory,
        }

    def _prompt(self, backend: Any, context: str, item: Any) -> dict[str, Any]:
        from lc_evals import DOCQA_TEMPLATE

        text = DOCQA_TEMPLATE.format(context=context, question=item.question)
        messages = [{"role": "user", "content": text}]
        n = len(backend.prompt_ids(messages))
        if n + 64 > backend.context_window:
            return {"prediction": None, "skipped": f"{n} prompt tokens exceed the window"}
        return {"prediction": backend.chat(messages, max_tokens=48), "prompt_tokens": n}


def load_records(path: pathlib.Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interrupted write
                continue
    return out


def key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["method"], r["kind"], r["length"], r["seed"], r["index"])


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("prediction") is not None:
            cells[(r["method"], r["kind"], r["length"])].append(r)
    rows = []
    for (method, kind, length), rs in sorted(cells.items()):
        k = sum(bool(r["correct"]) for r in rs)
        lo, hi = wilson_interval(k, len(rs))
        # verbatim memories: how often the memory held every planted fact of the answer
        held = [
            all(f.lower() in r["memory"].lower() for f in r["facts"])
            for r in rs
            if r.get("facts")
            and "memory" in r
            and method.split(":")[0] in ("sentences", "evidence", "evidence-0.7")
        ]
        rows.append(
            {
                "method": method,
                "kind": kind,
                "length": length,
                "n": len(rs),
                "correct": k,
                "accuracy": k / len(rs),
                "ci95": [round(lo, 3), round(hi, 3)],
                "seconds_mean": round(sum(r["seconds"] for r in rs) / len(rs), 2),
                "rss_mib_max": round(max(r["rss_mib"] for r in rs), 1),
                "memory_holds_facts": f"{sum(held)}/{len(held)}" if held else None,
            }
        )
    return rows


def plot(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted({r["length"] for r in rows})
    methods = sorted({r["method"] for r in rows})
    fig, axes = plt.subplots(1, len(lengths), figsize=(6 * len(lengths), 4), squeeze=False)
    width = 0.8 / max(len(methods), 1)
    for ax, length in zip(axes[0], lengths):
        for j, m in enumerate(methods):
            xs, ys, errs = [], [], [[], []]
            for i, kind in enumerate(KINDS):
                cell = [
                    r for r in rows if (r["method"], r["kind"], r["length"]) == (m, kind, length)
                ]
                if not cell:
                    continue
                c = cell[0]
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(c["accuracy"])
                errs[0].append(c["accuracy"] - c["ci95"][0])
                errs[1].append(c["ci95"][1] - c["accuracy"])
            label = m.replace("-instruct", "")
            ax.bar(xs, ys, width, yerr=errs, capsize=2, label=label, color=f"C{j % 10}")
        ax.set_xticks(range(len(KINDS)), KINDS)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{length // 1024}K tokens")
        ax.set_ylabel("accuracy (Wilson 95% interval)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=min(len(labels), 3))
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(rows: list[dict[str, Any]]) -> str:
    """A table per length: one row per method, ``correct/n [95% interval]`` per kind."""
    out = []
    for length in sorted({r["length"] for r in rows}):
        out.append(f"\n**{length // 1024}K tokens**\n")
        out.append("| method | " + " | ".join(KINDS) + " | s/item |")
        out.append("|---" * (len(KINDS) + 2) + "|")
        for m in sorted({r["method"] for r in rows if r["length"] == length}):
            cells, secs = [], []
            for kind in KINDS:
                c = [r for r in rows if (r["method"], r["kind"], r["length"]) == (m, kind, length)]
                if c:
                    lo, hi = c[0]["ci95"]
                    cells.append(f"{c[0]['correct']}/{c[0]['n']} [{lo:.2f}, {hi:.2f}]")
                    secs.append(c[0]["seconds_mean"])
                else:
                    cells.append("")
            mean = sum(secs) / len(secs) if secs else float("nan")
            out.append(f"| `{m}` | " + " | ".join(cells) + f" | {mean:.0f} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 65536])
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--n", type=int, default=30, help="items per (kind, length)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    p.add_argument("--chunk-tokens", type=int, default=2000, help="MemAgent chunk size")
    p.add_argument("--memory-tokens", type=int, default=400, help="MemAgent memory budget")
    p.add_argument("--rag-k", type=int, default=4, help="passages retrieved by BM25")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="torch device (cuda runs in bfloat16)")
    p.add_argument("--out", type=pathlib.Path, default=OUT)
    p.add_argument("--summary-only", action="store_true", help="rewrite JSON and plot only")
    args = p.parse_args()
    for m in args.methods:
        if ":" not in m or m.split(":")[0] not in METHOD_KINDS:
            p.error(f"--methods: {m!r} is not KIND:MODEL with KIND one of {METHOD_KINDS}")

    import torch

    import lc_evals
    from lc_agents.models import load_tokenizer

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    rec_path = args.out / "docqa_records.jsonl"
    records = load_records(rec_path)
    done = {key(r) for r in records}
    runner = Runner(args)
    for m in args.methods:
        want = runner.config_id(m)
        other = {r.get("config") for r in records if r["method"] == m} - {want}
        if want is not None and other:
            p.error(
                f"{rec_path} holds {m} records of another configuration ({sorted(map(str, other))}"
                f", now {want}); rename that method in those records or use another --out"
            )
    if not args.summary_only:
        tok = load_tokenizer(QWEN)
        todo = [
            (length, i, kind, m)
            for length in args.lengths
            for i in range(args.n)  # item-major: every cell grows evenly if interrupted
            for kind in args.kinds
            for m in args.methods
        ]
        items: dict[tuple[str, int], list[Any]] = {}
        for n_done, (length, i, kind, method) in enumerate(todo):
            k = (method, kind, length, args.seed, i)
            if k in done:
                continue
            if (kind, length) not in items:
                items[(kind, length)] = lc_evals.generate(
                    f"docqa_{kind}", n=args.n, length=length, seed=args.seed, tokenizer=tok
                )
            item = items[(kind, length)][i]
            t0 = time.perf_counter()
            out = runner.answer(method, item)
            seconds = time.perf_counter() - t0
            pred = out.get("prediction")
            correct = None if pred is None else bool(lc_evals.score_docqa(item, pred))
            rec = {
                "facts": list(item.metadata.get("facts", [])),
                "method": method,
                "kind": kind,
                "length": length,
                "seed": args.seed,
                "index": i,
                "question": item.question,
                "answers": list(item.answers),
                "correct": correct,
                "seconds": round(seconds, 2),
                "rss_mib": round(rss_mib(), 1),
                "config": runner.config_id(method),
                **out,
            }
            with rec_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            records.append(rec)
            print(
                f"[{n_done + 1}/{len(todo)}] {length} {kind} #{i} {method}: "
                f"{'ok ' if correct else 'NO '}{pred!r} (want {item.answers[0]!r}) {seconds:.0f}s",
                flush=True,
            )
    rows = summarize(load_records(rec_path))  # other runs may have appended too
    summary = {
        "benchmark": "docqa",
        "machine": f"{platform.machine()} {args.device}, torch threads {args.threads}",
        "python": platform.python_version(),
        "memagent_sizes": {"chunk_tokens": args.chunk_tokens, "memory_tokens": args.memory_tokens},
        "rag_k": args.rag_k,
        "targets": TARGETS,
        "rows": rows,
    }
    (args.out / "docqa.json").write_text(json.dumps(summary, indent=1) + "\n")
    if rows:
        plot(rows, args.out / "docqa.png")
    print(markdown(rows))


if __name__ == "__main__":
    main()

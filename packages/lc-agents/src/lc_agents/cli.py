"""The ``lc-agents`` command line: ``ask`` (one document, one question) and ``serve``.

Examples::

    lc-agents ask --demo
    lc-agents ask report.pdf --question "Which year did revenue peak?"
    lc-agents ask notes.md -q "..." --endpoint http://127.0.0.1:8000/v1 --model qwen3-8b
    lc-agents serve --port 8080
    lc-agents arena --repo ./mathx --issue issue.json --out arena-results
"""

from __future__ import annotations

import pathlib
from typing import Annotated, Any

import typer
from rich.console import Console

from lc_agents.errors import AgentError

app = typer.Typer(
    name="lc-agents",
    help="Answer questions over documents of any length with a memory agent (MemAgent).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DEMO_LENGTH = 16384
DEMO_SEED = 0


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


# MemAgent options shared by `ask` and `serve`
ChunkTokensOption = Annotated[int | None, typer.Option(min=16, help="Tokens per chunk.")]
MemoryTokensOption = Annotated[int | None, typer.Option(min=8, help="Memory budget (tokens).")]
PlainOption = Annotated[
    bool, typer.Option("--plain", help="Plain prompting, no copy-constrained decoding.")
]
AdapterOption = Annotated[
    str | None,
    typer.Option(
        help="LoRA adapter merged into the local model: a shipped name "
        "(e.g. memagent-smollm2) or a folder. Implies plain prompting at the adapter's "
        "chunk and memory sizes."
    ),
]


def build_backend(
    endpoint: str | None,
    model: str | None,
    api_key: str | None = None,
    adapter: str | None = None,
) -> Any:
    """The chat backend chosen on the command line (local embedded model by default)."""
    if endpoint:
        from lc_agents.backends.openai_http import OpenAICompatibleBackend

        if not model:
            raise typer.BadParameter("--endpoint needs --model NAME", param_hint="--model")
        if adapter:
            raise typer.BadParameter(
                "--adapter is merged into the local model; it cannot apply to --endpoint",
                param_hint="--adapter",
            )
        return OpenAICompatibleBackend(endpoint, model, api_key=api_key, max_retries=2)
    from lc_agents.backends.local import LocalBackend

    return LocalBackend(model, adapter=adapter)


def build_config(
    chunk_tokens: int | None,
    memory_tokens: int | None,
    plain: bool,
    adapter: str | None = None,
) -> Any:
    """MemAgent config from the CLI options (defaults tuned for the embedded model).

    With an ``adapter``, the agent prompts in free text at the chunk and memory sizes the
    adapter was trained with (:func:`lc_agents.adapters.adapter_memagent_config`).
    """
    from dataclasses import replace

    from lc_agents.memagent import MemAgentConfig

    if adapter:
        from lc_agents.adapters import adapter_memagent_config

        cfg = adapter_memagent_config(adapter)
    else:
        cfg = MemAgentConfig.plain() if plain else MemAgentConfig()
    if chunk_tokens is not None:
        cfg = replace(cfg, chunk_tokens=chunk_tokens)
    if memory_tokens is not None:
        cfg = replace(cfg, memory_tokens=memory_tokens)
    return cfg


@app.command()
def ask(
    file: Annotated[
        pathlib.Path | None,
        typer.Argument(help="Document to read: .txt, .md (any UTF-8 text) or .pdf."),
    ] = None,
    question: Annotated[
        str | None, typer.Option("--question", "-q", help="The question to answer.")
    ] = None,
    demo: Annotated[
        bool,
        typer.Option("--demo", help="Generate a long needle-in-a-haystack document and answer it."),
    ] = False,
    demo_length: Annotated[
        int, typer.Option(help="Length of the demo document (tokens).", min=512)
    ] = DEMO_LENGTH,
    seed: Annotated[int, typer.Option(help="Seed of the demo document.")] = DEMO_SEED,
    endpoint: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible server URL, e.g. http://127.0.0.1:8000/v1."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model name at --endpoint, or a local model directory."),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENAI_API_KEY", help="API key for --endpoint.")
    ] = None,
    chunk_tokens: ChunkTokensOption = None,
    memory_tokens: MemoryTokensOption = None,
    plain: PlainOption = False,
    adapter: AdapterOption = None,
    show_memory: Annotated[
        bool, typer.Option("--show-memory", help="Print the memory after every chunk.")
    ] = False,
    checkpoint: Annotated[
        pathlib.Path | None,
        typer.Option(help="JSON checkpoint; an interrupted run resumes from it."),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Tokenizer directory counting chunk tokens for --endpoint runs."),
    ] = None,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", help="Print peak resident memory and document tokens per second."
        ),
    ] = False,
) -> None:
    """Read a document chunk by chunk with MemAgent and answer a question about it."""
    expected: tuple[str, ...] | None = None
    try:
        if demo:
            if file is not None:
                raise _fail("give either FILE or --demo, not both", 2)
            backend = build_backend(endpoint, model, api_key, adapter)
            document, question, expected = _demo_item(backend, demo_length, seed)
        else:
            if file is None:
                raise _fail("give a FILE to read (or --demo)", 2)
            if question is None or not question.strip():
                raise _fail("missing --question: what should be answered about the document?", 2)
            from lc_agents.documents import read_document

            document = read_document(file)
            backend = build_backend(endpoint, model, api_key, adapter)
        from lc_agents.memagent import MemAgent

        agent = MemAgent(
            backend,
            build_config(chunk_tokens, memory_tokens, plain, adapter),
            tokenizer=_tok(tokenizer),
        )
        out.print(f"[bold]Question:[/] {question}", highlight=False)
        result = agent.run(document, question, checkpoint=checkpoint, progress=True)
    except AgentError as exc:
        raise _fail(str(exc)) from None
    if show_memory:
        out.print("[bold]Memory trace:[/]")
        for step in result.trace:
            tag = "kept" if step.kept else "new"
            out.print(
                f"  chunk {step.chunk_index + 1}/{result.n_chunks} [{tag}] {step.memory!r}",
                highlight=False,
                markup=False,  # the tag and the memory's own brackets are text
            )
    if expected is not None:
        out.print(f"[bold]Expected:[/] {' / '.join(expected)}", highlight=False)
    out.print(f"[bold]Answer:[/] {result.answer}", highlight=False)
    if expected is not None:
        ok = any(e.lower() in result.answer.lower() for e in expected)
        out.print("[green]correct[/]" if ok else "[red]incorrect[/]")
    out.print(
        f"[dim]{result.document_tokens} tokens in {result.n_chunks} chunks, "
        f"{result.seconds:.1f} s[/]",
        highlight=False,
    )
    if profile:
        out.print(
            f"[dim]profile: peak RSS {_peak_rss_mib():.0f} MiB (whole process, model "
            f"included), {result.document_tokens / max(result.seconds, 1e-9):.0f} document "
            "tokens/s[/]",
            highlight=False,
        )


def _peak_rss_mib() -> float:
    """Peak resident set size of this process so far (MiB)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def _tok(path: str | None) -> Any:
    if path is None:
        return None
    from lc_agents.models import load_tokenizer

    return load_tokenizer(path)


def _demo_item(backend: Any, length: int, seed: int) -> tuple[str, str, tuple[str, ...]]:
    import lc_evals
    from lc_agents.models import load_tokenizer

    tokenizer = getattr(backend, "tokenizer", None) or load_tokenizer()
    item = lc_evals.generate(
        "niah_single",
        n=1,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack="essay",
        value_kind="number",
    )[0]
    err.print(
        f"[dim]demo: a {length}-token essay with one hidden 7-digit number (seed {seed})[/]",
        highlight=False,
    )
    return item.context, item.question, item.answers


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Interface to bind (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    endpoint: Annotated[
        str | None, typer.Option(help="Backend: OpenAI-compatible server URL.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Backend model name, or a local model directory.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENAI_API_KEY", help="API key for --endpoint.")
    ] = None,
    chunk_tokens: ChunkTokensOption = None,
    memory_tokens: MemoryTokensOption = None,
    plain: PlainOption = False,
    adapter: AdapterOption = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Tokenizer directory counting chunk tokens for --endpoint runs."),
    ] = None,
) -> None:
    """Serve MemAgent as an OpenAI-compatible chat-completions API."""
    import uvicorn

    from lc_agents.server import create_app

    try:
        backend = build_backend(endpoint, model, api_key, adapter)
        app_ = create_app(
            backend,
            build_config(chunk_tokens, memory_tokens, plain, adapter),
            tokenizer=_tok(tokenizer),
        )
    except AgentError as exc:
        raise _fail(str(exc)) from None
    err.print(f"serving MemAgent on http://{host}:{port}/v1", highlight=False)
    uvicorn.run(app_, host=host, port=port, log_level="warning")


def _arena_retriever(
    repo: pathlib.Path, kind: str, rerank: str, budget_tokens: int
) -> tuple[Any, str]:
    """The context retriever of ``lc-agents arena`` and a note saying which it is."""
    import importlib.util

    from lc_evals.arena import whole_file_context

    if kind in ("auto", "racg"):
        needed = ["tree_sitter", "bm25s"] + (["sentence_transformers"] if rerank == "dense" else [])
        missing = [m for m in needed if importlib.util.find_spec(m) is None]
        if not missing:
            from lc_agents.code import RACGConfig, racg_retriever
            from lc_agents.retrieval.errors import EmptyIndexError

            try:
                retrieve = racg_retriever(
                    repo, budget_tokens=budget_tokens, config=RACGConfig(rerank=rerank)
                )
            except EmptyIndexError as exc:
                missing = [str(exc)]
            else:
                note = f"RACG code retriever ({rerank} rerank, {budget_tokens}-token budget)"
                return retrieve, note
        if kind == "racg":
            raise typer.BadParameter(
                f"the RACG code retriever cannot run: {', '.join(missing)} "
                "(install lc-agents[retrieval])",
                param_hint="--retriever",
            )
        reason = ", ".join(missing)
        return whole_file_context(repo), f"whole small files (RACG unavailable: {reason})"
    return whole_file_context(repo), "whole small files (no ranking)"


def _scripted_arena_model(submitter_file: pathlib.Path, reviewer_file: pathlib.Path) -> Any:
    from lc_evals.arena import ScriptedModel
    from lc_evals.arena.prompts import REVIEWER_SYSTEM

    replies = {"submitter": submitter_file.read_text(), "reviewer": reviewer_file.read_text()}

    def reply(messages: Any) -> str:
        role = "reviewer" if messages and messages[0]["content"] == REVIEWER_SYSTEM else "submitter"
        return replies[role]

    return ScriptedModel(reply)


@app.command()
def arena(
    repo: Annotated[
        pathlib.Path,
        typer.Option(exists=True, file_okay=False, help="Repository at the buggy commit."),
    ],
    issue: Annotated[
        pathlib.Path,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Issue JSON: id, description, gold_patch or gold_patch_file, test_command.",
        ),
    ],
    out_dir: Annotated[
        pathlib.Path,
        typer.Option("--out", help="Directory for battles.jsonl and leaderboard.json."),
    ] = pathlib.Path("arena-results"),
    endpoint: Annotated[
        str | None, typer.Option(help="Model: OpenAI-compatible server URL.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name for --endpoint, or a local model directory.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENAI_API_KEY", help="API key for --endpoint.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Name of the model on the leaderboard.")] = None,
    retriever: Annotated[
        str, typer.Option(help="Context: auto (RACG if available), racg, or files.")
    ] = "auto",
    rerank: Annotated[
        str, typer.Option(help="RACG chunk rerank: dense (MiniLM), bm25 or none.")
    ] = "dense",
    rounds: Annotated[int, typer.Option(min=1, help="Battles per pairing.")] = 1,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per model reply.")] = 512,
    context_chars: Annotated[
        int, typer.Option(min=100, help="Characters of retrieved code per prompt.")
    ] = 12000,
    cpu_seconds: Annotated[int, typer.Option(min=1, help="CPU seconds per process.")] = 60,
    wall_seconds: Annotated[float, typer.Option(min=1, help="Wall-clock seconds per run.")] = 300,
    memory_mb: Annotated[int, typer.Option(min=64, help="Address space per process (MiB).")] = 4096,
    scripted_submitter: Annotated[
        pathlib.Path | None,
        typer.Option(dir_okay=False, exists=True, help="Replay this reply as the submitter."),
    ] = None,
    scripted_reviewer: Annotated[
        pathlib.Path | None,
        typer.Option(dir_okay=False, exists=True, help="Replay this reply as the reviewer."),
    ] = None,
) -> None:
    """SwingArena battle: the model patches the issue, reviews with tests, CI judges.

    One model plays both roles (self-play). Battles already in --out/battles.jsonl are
    skipped, so an interrupted run resumes where it stopped.
    """
    import json

    from lc_evals.arena import (
        ArenaStore,
        BattleConfig,
        SandboxLimits,
        format_leaderboard,
        load_issue,
        run_arena,
    )
    from lc_evals.arena.patch import PatchError

    if retriever not in ("auto", "racg", "files"):
        raise typer.BadParameter("use auto, racg or files", param_hint="--retriever")
    if rerank not in ("dense", "bm25", "none"):
        raise typer.BadParameter("use dense, bm25 or none", param_hint="--rerank")
    if (scripted_submitter is None) != (scripted_reviewer is None):
        raise typer.BadParameter(
            "give both --scripted-submitter and --scripted-reviewer", param_hint="--scripted-*"
        )
    try:
        task = load_issue(issue, repo=repo)
    except (ValueError, OSError, PatchError) as exc:
        raise _fail(f"{issue}: {exc}") from None
    # about four characters of code per token
    retrieve, note = _arena_retriever(repo.resolve(), retriever, rerank, context_chars // 4)
    if scripted_submitter is not None and scripted_reviewer is not None:
        chat_model = _scripted_arena_model(scripted_submitter, scripted_reviewer)
        label = name or "scripted"
    else:
        try:
            chat_model = build_backend(endpoint, model, api_key)
        except AgentError as exc:
            raise _fail(str(exc)) from None
        label = name or (model if endpoint and model else "smollm2-135m-instruct")
    err.print(f"[dim]context: {note}[/]", highlight=False)
    config = BattleConfig(
        limits=SandboxLimits(
            cpu_seconds=cpu_seconds,
            wall_seconds=wall_seconds,
            memory_bytes=memory_mb * 1024**2,
        ),
        max_context_chars=context_chars,
        submitter_tokens=max_tokens,
        reviewer_tokens=max_tokens,
    )
    store = ArenaStore(out_dir / "battles.jsonl")
    before = store.done()
    table = run_arena(
        [task],
        {label: chat_model},
        store,
        retrievers={task.id: retrieve},
        config=config,
        rounds=rounds,
    )
    records = [r for r in store.records() if r["issue"] == task.id]
    for rec in records:
        v = rec["verdict"]
        tag = "resumed" if rec["id"] in before else "played"
        out.print(
            f"{rec['id']} ({tag}): winner [bold]{v['winner']}[/] - {v['reason']}; "
            f"patch valid {v['patch_valid']}, tests valid {v['tests_valid']}, "
            f"{len(rec['events'])} containment event(s)",
            highlight=False,
        )
    board = [s.to_dict() for s in table]
    (out_dir / "leaderboard.json").write_text(json.dumps(board, indent=2) + "\n")
    out.print(format_leaderboard(table), highlight=False)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

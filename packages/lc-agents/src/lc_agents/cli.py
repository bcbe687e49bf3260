"""The ``lc-agents`` command line: ``ask`` (one document, one question), ``serve``, ``arena``.

Examples::

    lc-agents ask --demo
    lc-agents ask report.pdf --question "Which year did revenue peak?"
    lc-agents ask notes.md -q "..." --model smollm2-135m-instruct --preset sentences
    lc-agents ask notes.md -q "..." --endpoint http://127.0.0.1:8000/v1 --model qwen3-8b
    lc-agents serve --port 8080 --api-key "$KEY"
    lc-agents arena --repo ./mathx --issue issue.json --out arena-results

Every mistake a user can make (a bad option, a missing or binary file, an unreachable
server, a timeout) ends in one ``error: ...`` line on stderr and a non-zero exit code
(2 for bad options, 1 for the rest), never a traceback. Text from documents, questions,
answers and paths is printed literally (never parsed as rich markup).
"""

from __future__ import annotations

import ipaddress
import pathlib
import re
import socket
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from lc_agents.errors import AgentError
from lc_agents.memagent import MEMAGENT_PRESETS
from lc_agents.models import DEFAULT_CHAT_MODEL, EMBEDDED_MODELS

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DEMO_LENGTH = 16384
DEMO_SEED = 0


def _error_line(message: str) -> None:
    """Print ``error: message`` as one line on stderr (the message literally)."""
    line = re.sub(r"\s*\n\s*", " ", str(message).strip())
    err.print(Text.assemble(("error:", "bold red"), " ", line))


def _fail(message: str, code: int = 1) -> typer.Exit:
    """Print the error line; return the ``typer.Exit`` to raise (``raise _fail(...)``)."""
    _error_line(message)
    return typer.Exit(code)


def _click_class(name: str) -> type[Exception]:
    """Click's exception class ``name`` as typer raises it (typer may vendor click)."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


_CLICK_ERROR = _click_class("ClickException")
_USAGE_ERROR = _click_class("UsageError")


class _Commands(TyperGroup):
    """The command group; a usage error (bad option value, unknown option, missing
    argument) ends in one ``error: ...`` line and exit code 2 instead of a usage box."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(
                args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra
            )
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except _CLICK_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                # `lc-agents` or `lc-agents ask` alone: let typer print the help
                return super().main(
                    args, prog_name, complete_var, True, windows_expand_args, **extra
                )
            message = exc.format_message()  # type: ignore[attr-defined]
            ctx = getattr(exc, "ctx", None)
            if isinstance(exc, _USAGE_ERROR) and ctx is not None:
                message += f" (see '{ctx.command_path} --help')"
            _error_line(message)
            sys.exit(int(getattr(exc, "exit_code", 1)))
        except typer.Abort:
            _error_line("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="lc-agents",
    help="Answer questions over documents of any length with a memory agent (MemAgent).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Commands,
)

_EMBEDDED = ", ".join(EMBEDDED_MODELS)
_PRESETS = ", ".join(MEMAGENT_PRESETS)

# MemAgent options shared by `ask` and `serve`
ChunkTokensOption = Annotated[int | None, typer.Option(min=16, help="Tokens per chunk.")]
MemoryTokensOption = Annotated[int | None, typer.Option(min=8, help="Memory budget (tokens).")]
PlainOption = Annotated[
    bool, typer.Option("--plain", help="Plain prompting, no copy-constrained decoding.")
]


def _preset_name(value: str) -> str:
    """Parse ``--preset``: one of :data:`~lc_agents.memagent.MEMAGENT_PRESETS`."""
    if value not in MEMAGENT_PRESETS:
        raise typer.BadParameter(f"{value!r} is not a preset; use one of {_PRESETS}")
    return value


PresetOption = Annotated[
    str | None,
    typer.Option(
        parser=_preset_name,
        metavar="NAME",
        help=f"MemAgent preset: {_PRESETS} (default: the one suiting --model). "
        "--chunk-tokens and --memory-tokens apply on top.",
    ),
]
AdapterOption = Annotated[
    str | None,
    typer.Option(
        help="LoRA adapter merged into the local model: a shipped name "
        "(e.g. memagent-smollm2) or a folder. Implies plain prompting at the adapter's "
        "chunk and memory sizes (it wins over --preset)."
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        help=f"Local model: an embedded one ({_EMBEDDED}; default {DEFAULT_CHAT_MODEL}) "
        "or a model directory. With --endpoint: the model name at the server."
    ),
]
EndpointOption = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible server URL, e.g. http://127.0.0.1:8000/v1."),
]
TokenizerOption = Annotated[
    str | None,
    typer.Option(
        help="Tokenizer counting chunk tokens for --endpoint runs: a directory or an "
        f"embedded model name (default: {DEFAULT_CHAT_MODEL}'s)."
    ),
]
# the API key for --endpoint (`ask` and `arena` call it --api-key, `serve` --endpoint-api-key)
ApiKeyOption = Annotated[
    str | None, typer.Option(envvar="OPENAI_API_KEY", help="API key for --endpoint.")
]


def check_options(
    endpoint: str | None,
    model: str | None,
    adapter: str | None = None,
    plain: bool = False,
    preset: str | None = None,
) -> None:
    """Check the backend and MemAgent options before anything is loaded.

    Raises:
        typer.Exit: (code 2) after printing one ``error:`` line.
    """
    if endpoint is not None:
        from lc_agents.backends.openai_http import check_base_url, suggest_base_url

        if "://" not in endpoint:
            raise _fail(f"--endpoint needs a scheme: {suggest_base_url(endpoint)}", 2)
        try:
            check_base_url(endpoint)
        except ValueError as exc:
            raise _fail(f"--endpoint: {exc}", 2) from None
        if not model:
            raise _fail("--endpoint needs --model NAME (the model's name at the server)", 2)
        if adapter:
            raise _fail(
                "--adapter is merged into the local model; it cannot apply to --endpoint", 2
            )
    elif model is not None and model not in EMBEDDED_MODELS:
        path = pathlib.Path(model)
        if not path.exists():
            raise _fail(
                f"unknown --model {model!r}: give an embedded model ({_EMBEDDED}) "
                "or a local model directory",
                2,
            )
        if not path.is_dir():
            raise _fail(f"--model {model!r} is a file; give the model's directory", 2)
    if plain and preset is not None:
        raise _fail("give --plain or --preset, not both", 2)


def build_backend(
    endpoint: str | None,
    model: str | None,
    api_key: str | None = None,
    adapter: str | None = None,
    *,
    timeout: float | None = None,
) -> Any:
    """The chat backend chosen on the command line (local embedded model by default).

    Args:
        endpoint: OpenAI-compatible server URL, or ``None`` for a local model.
        model: model name at ``endpoint``; else an embedded model name or a model
            directory (``None``: :data:`~lc_agents.models.DEFAULT_CHAT_MODEL`).
        api_key: bearer token for ``endpoint``.
        adapter: LoRA adapter merged into the local model.
        timeout: seconds per request to ``endpoint`` (default 120).
    """
    if endpoint:
        from lc_agents.backends.openai_http import OpenAICompatibleBackend

        if not model:
            raise typer.BadParameter("--endpoint needs --model NAME", param_hint="--model")
        if adapter:
            raise typer.BadParameter(
                "--adapter is merged into the local model; it cannot apply to --endpoint",
                param_hint="--adapter",
            )
        return OpenAICompatibleBackend(
            endpoint, model, api_key=api_key, max_retries=2, timeout=timeout or 120.0
        )
    from lc_agents.backends.local import LocalBackend

    if adapter and model is None:  # the adapter's own base model, when it is embedded
        from lc_agents.adapters import adapter_base_model
        from lc_agents.models import EMBEDDED_MODELS

        base = adapter_base_model(adapter)
        model = base if base in EMBEDDED_MODELS else None
    return LocalBackend(model, adapter=adapter)


def build_config(
    chunk_tokens: int | None,
    memory_tokens: int | None,
    plain: bool,
    adapter: str | None = None,
    preset: str | None = None,
    model: str | None = None,
) -> Any:
    """MemAgent config from the CLI options.

    With an ``adapter``, the agent prompts in free text at the chunk and memory sizes the
    adapter was trained with (:func:`lc_agents.adapters.adapter_memagent_config`); else
    ``plain`` gives :meth:`MemAgentConfig.plain`, else the ``preset`` (default: the one
    :func:`~lc_agents.memagent.default_preset` picks for ``model``, ``None`` being the
    default model). ``chunk_tokens`` and ``memory_tokens`` apply on top.

    Raises:
        ValueError: ``plain`` and ``preset`` together, or an unknown preset.
    """
    from dataclasses import replace

    from lc_agents.memagent import MemAgentConfig, default_preset

    if adapter:
        from lc_agents.adapters import adapter_memagent_config

        cfg = adapter_memagent_config(adapter)
    elif plain:
        if preset is not None:
            raise ValueError("give --plain or --preset, not both")
        cfg = MemAgentConfig.plain()
    else:
        cfg = MemAgentConfig.preset(preset if preset is not None else default_preset(model))
    if chunk_tokens is not None:
        cfg = replace(cfg, chunk_tokens=chunk_tokens)
    if memory_tokens is not None:
        cfg = replace(cfg, memory_tokens=memory_tokens)
    return cfg


def _read(file: pathlib.Path) -> str:
    """The document's text; a one-line error for a directory, missing or unreadable file."""
    from lc_agents.documents import read_document

    try:
        if file.is_dir():
            raise _fail(f"{file} is a directory; give a document file (.txt, .md or .pdf)")
        return read_document(file)
    except AgentError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot read {file}: {exc.strerror or exc}") from None


def _labelled(label: str, text: str, style: str = "bold") -> Text:
    """``label`` styled, ``text`` literal (brackets in it are not markup)."""
    return Text.assemble((label, style), text)


def _sources_line(result: Any) -> Text | None:
    """``Sources: chunk 3, 7 of 12`` (1-based) from ``result.sources``, if any."""
    sources = tuple(getattr(result, "sources", ()) or ())
    if not sources:
        return None
    chunks = ", ".join(str(int(i) + 1) for i in sources)
    return _labelled("Sources: ", f"chunk {chunks} of {result.n_chunks}")


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
    endpoint: EndpointOption = None,
    model: ModelOption = None,
    api_key: ApiKeyOption = None,
    timeout: Annotated[
        float | None,
        typer.Option(help="Seconds each request to --endpoint may take (default 120)."),
    ] = None,
    chunk_tokens: ChunkTokensOption = None,
    memory_tokens: MemoryTokensOption = None,
    plain: PlainOption = False,
    preset: PresetOption = None,
    adapter: AdapterOption = None,
    show_memory: Annotated[
        bool, typer.Option("--show-memory", help="Print the memory after every chunk.")
    ] = False,
    checkpoint: Annotated[
        pathlib.Path | None,
        typer.Option(help="JSON checkpoint; an interrupted run resumes from it."),
    ] = None,
    tokenizer: TokenizerOption = None,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", help="Print peak resident memory and document tokens per second."
        ),
    ] = False,
) -> None:
    """Read a document chunk by chunk with MemAgent and answer a question about it."""
    check_options(endpoint, model, adapter, plain, preset)
    if timeout is not None:
        if endpoint is None:
            raise _fail("--timeout limits requests to --endpoint; the local model has none", 2)
        if not timeout > 0:
            raise _fail(f"--timeout must be > 0 seconds, got {timeout:g}", 2)
    expected: tuple[str, ...] | None = None
    if demo:
        if file is not None:
            raise _fail("give either FILE or --demo, not both", 2)
    else:
        if file is None:
            raise _fail("give a FILE to read (or --demo)", 2)
        if question is None or not question.strip():
            raise _fail("missing --question: what should be answered about the document?", 2)
        document = _read(file)
    try:
        config = build_config(chunk_tokens, memory_tokens, plain, adapter, preset, model)
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    try:
        backend = build_backend(endpoint, model, api_key, adapter, timeout=timeout)
        tok = _tok(tokenizer) if tokenizer is not None else getattr(backend, "tokenizer", None)
        if demo:
            if tok is None:  # the demo is measured with the tokenizer the agent counts with
                from lc_agents.models import load_tokenizer

                tok = load_tokenizer()
            document, question, expected = _demo_item(backend, demo_length, seed, tok)
        assert question is not None
        from lc_agents.memagent import MemAgent

        agent = MemAgent(backend, config, tokenizer=tok)
        out.print(_labelled("Question: ", question))
        result = agent.run(document, question, checkpoint=checkpoint, progress=True)
    except AgentError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:  # e.g. a checkpoint path that cannot be written
        where = f"{exc.filename}: " if exc.filename else ""
        raise _fail(f"{where}{exc.strerror or exc}") from None
    if show_memory:
        out.print(Text("Memory trace:", style="bold"))
        for step in result.trace:
            tag = "kept" if step.kept else "new"
            out.print(
                f"  chunk {step.chunk_index + 1}/{result.n_chunks} [{tag}] {step.memory!r}",
                highlight=False,
                markup=False,  # the tag and the memory's own brackets are text
            )
    if expected is not None:
        out.print(_labelled("Expected: ", " / ".join(expected)))
    out.print(_labelled("Answer: ", result.answer))
    sources = _sources_line(result)
    if sources is not None:
        out.print(sources)
    if not getattr(result, "found", True):
        out.print(Text("The answer was not found in the document.", style="yellow"))
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

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def _tok(path: str | None) -> Any:
    if path is None:
        return None
    from lc_agents.models import load_tokenizer

    return load_tokenizer(path)


def _demo_item(
    backend: Any, length: int, seed: int, tokenizer: Any = None
) -> tuple[str, str, tuple[str, ...]]:
    """A needle-in-a-haystack item measured with the tokenizer the agent counts with.

    ``tokenizer`` defaults to the backend's, else the default model's.
    """
    import lc_evals

    if tokenizer is None:
        tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        from lc_agents.models import load_tokenizer

        tokenizer = load_tokenizer()
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


def _is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), as uvicorn binds it; one error line if it cannot."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1) from None
    return sock


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Interface to bind (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="LC_AGENTS_API_KEY",
            help="Require this key from clients (header Authorization: Bearer KEY).",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a request may take (waiting included); past it the client "
            "gets HTTP 504. Default: no limit."
        ),
    ] = None,
    served_model_name: Annotated[
        str, typer.Option(help="The model id clients send and /v1/models lists.")
    ] = "memagent",
    endpoint: Annotated[
        str | None, typer.Option(help="Backend: OpenAI-compatible server URL.")
    ] = None,
    model: ModelOption = None,
    endpoint_api_key: ApiKeyOption = None,
    chunk_tokens: ChunkTokensOption = None,
    memory_tokens: MemoryTokensOption = None,
    plain: PlainOption = False,
    preset: PresetOption = None,
    adapter: AdapterOption = None,
    tokenizer: TokenizerOption = None,
) -> None:
    """Serve MemAgent as an OpenAI-compatible chat-completions API."""
    check_options(endpoint, model, adapter, plain, preset)
    if api_key is not None and not api_key.strip():
        raise _fail("--api-key (or LC_AGENTS_API_KEY) is empty", 2)
    if timeout is not None and not timeout > 0:
        raise _fail(f"--timeout must be > 0 seconds, got {timeout:g}", 2)
    if not served_model_name.strip():
        raise _fail("--served-model-name is empty", 2)
    try:
        config = build_config(chunk_tokens, memory_tokens, plain, adapter, preset, model)
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    import uvicorn

    from lc_agents.server import create_app

    sock = _listen(host, port)
    try:
        backend = build_backend(endpoint, model, endpoint_api_key, adapter)
        app_ = create_app(
            backend,
            config,
            tokenizer=_tok(tokenizer),
            model_name=served_model_name,
            api_key=api_key,
            request_timeout_s=timeout,
        )
    except AgentError as exc:
        sock.close()
        raise _fail(str(exc)) from None
    except BaseException:
        sock.close()
        raise
    if not _is_loopback(host):
        err.print(
            Text(
                f"warning: --host {host} is not a loopback address: other machines can "
                "reach this server",
                style="yellow",
            )
        )
        if api_key is None:
            err.print(
                Text(
                    "WARNING: no --api-key: anyone who can reach this address can run the "
                    "model; set --api-key KEY or LC_AGENTS_API_KEY",
                    style="bold red",
                )
            )
    bound_port = sock.getsockname()[1]
    err.print(Text(f"serving MemAgent as {served_model_name!r} on http://{host}:{bound_port}/v1"))
    server = uvicorn.Server(uvicorn.Config(app_, log_level="warning"))
    server.run(sockets=[sock])


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


def _model_label(endpoint: str | None, model: str | None) -> str:
    """The leaderboard name of the model a run uses (its name, or its folder's)."""
    if model is None:
        return DEFAULT_CHAT_MODEL
    if endpoint or model in EMBEDDED_MODELS:
        return model
    return pathlib.Path(model).name or model


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
    api_key: ApiKeyOption = None,
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
    unsafe_no_isolation: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-isolation",
            help="Run the models' code WITHOUT the bubblewrap sandbox (never for untrusted "
            "models on a machine that matters).",
        ),
    ] = False,
) -> None:
    """SwingArena battle: the model patches the issue, reviews with tests, CI judges.

    One model plays both roles (self-play). Battles already in --out/battles.jsonl are
    skipped, so an interrupted run resumes where it stopped. The models' patches and tests
    run under bubblewrap; without it the command stops with an error unless
    --unsafe-no-isolation is given (and then says so, and records it).
    """
    import json

    from lc_evals.arena import (
        ArenaStore,
        BattleConfig,
        IsolationUnavailable,
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
        label = name or _model_label(endpoint, model)
    err.print(Text(f"context: {note}", style="dim"))
    config = BattleConfig(
        limits=SandboxLimits(
            cpu_seconds=cpu_seconds,
            wall_seconds=wall_seconds,
            memory_bytes=memory_mb * 1024**2,
        ),
        max_context_chars=context_chars,
        submitter_tokens=max_tokens,
        reviewer_tokens=max_tokens,
        unsafe_no_isolation=unsafe_no_isolation,
    )
    if unsafe_no_isolation:
        err.print(Text("UNSAFE: running the models' code without isolation", style="bold red"))
    store = ArenaStore(out_dir / "battles.jsonl")
    before = store.done()
    try:
        table = run_arena(
            [task],
            {label: chat_model},
            store,
            retrievers={task.id: retrieve},
            config=config,
            rounds=rounds,
        )
    except IsolationUnavailable as exc:
        raise _fail(str(exc)) from None
    records = [r for r in store.records() if r["issue"] == task.id]
    for rec in records:
        v = rec["verdict"]
        tag = "resumed" if rec["id"] in before else "played"
        out.print(
            Text.assemble(
                f"{rec['id']} ({tag}): winner ",
                (str(v["winner"]), "bold"),
                f" - {v['reason']}; patch valid {v['patch_valid']}, tests valid "
                f"{v['tests_valid']}, {len(rec['events'])} containment event(s), "
                f"isolation {rec.get('isolation', 'unknown')}",
            )
        )
    board = [s.to_dict() for s in table]
    (out_dir / "leaderboard.json").write_text(json.dumps(board, indent=2) + "\n")
    out.print(format_leaderboard(table), highlight=False, markup=False)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

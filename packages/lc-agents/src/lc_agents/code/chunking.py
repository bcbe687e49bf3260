"""Syntax-aware chunking of source files with tree-sitter (Python, C++, Rust, Go).

A file is parsed once and cut into non-overlapping chunks of whole lines:

* ``"function"``: a free function (with its decorators, template header and the comment
  lines directly above it);
* ``"method"``: a function inside a class, struct, ``impl``, trait or namespace-level
  class (Go methods, which live outside their type, are methods too);
* ``"class"``: a type definition (class, struct, enum, union, trait, ``impl`` block, Go
  ``type``). When it holds methods, each method becomes its own chunk and the class chunk
  keeps the remaining lines (header, docstring, fields); runs of lines that hold only
  brackets, whitespace and end-of-line comments are dropped;
* ``"block"``: top-level code outside any definition (imports, constants, statements),
  grouped into runs of consecutive lines.

Names are qualified with their enclosing namespaces and classes: ``Outer.Inner.method``
in Python, ``geo::Box::volume`` in C++, ``Stack::push`` in Rust (the type of an ``impl``
block, also for trait impls) and ``Stack.Push`` in Go. Line numbers are 1-based and
inclusive and counted as tree-sitter counts them: only ``"\\n"`` ends a line (a form
feed, a lone ``"\\r"`` or U+2028 does not). Chunks longer than ``max_lines`` are split
into consecutive windows that keep the name, with ``part`` set.

Examples:
    >>> from lc_agents.code import chunk_source
    >>> src = "import os\\n\\nclass A:\\n    x = 1\\n\\n    def f(self):\\n        return 2\\n"
    >>> [(c.kind, c.name, c.start_line, c.end_line) for c in chunk_source(src, "python")]
    [('block', '', 1, 1), ('class', 'A', 3, 4), ('method', 'A.f', 6, 7)]
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lc_agents.retrieval.errors import RetrievalError

__all__ = [
    "LANGUAGES",
    "CodeChunk",
    "chunk_source",
    "language_for_path",
]


@dataclass(frozen=True)
class CodeChunk:
    """A contiguous run of whole source lines with its place in the repository.

    Attributes:
        path: file path relative to the repository root (``/`` separators).
        language: ``"python"``, ``"cpp"``, ``"rust"`` or ``"go"``.
        kind: ``"function"``, ``"method"``, ``"class"`` or ``"block"``.
        name: qualified name (``""`` for blocks).
        start_line: first line, 1-based.
        end_line: last line, 1-based, inclusive.
        text: the source lines (without a trailing newline).
        part: 0 for a whole unit, else the 1-based window of a split unit.
    """

    path: str
    language: str
    kind: str
    name: str
    start_line: int
    end_line: int
    text: str
    part: int = 0

    @property
    def id(self) -> str:
        """Stable id ``path:start-end``."""
        return f"{self.path}:{self.start_line}-{self.end_line}"

    @property
    def header(self) -> str:
        """The first line of :meth:`render`: ``### path:L<start>-<end> <kind> <name>``."""
        label = f" {self.kind} {self.name}" if self.name else f" {self.kind}"
        return f"### {self.path}:L{self.start_line}-{self.end_line}{label}"

    def render(self) -> str:
        """The chunk as it is put in a prompt: :attr:`header`, newline, source text."""
        return f"{self.header}\n{self.text}"


@dataclass(frozen=True)
class _Spec:
    module: str
    suffixes: tuple[str, ...]
    sep: str
    functions: frozenset[str]
    containers: frozenset[str]  # recursed into; their leftover lines form a chunk
    namespaces: frozenset[str]  # recursed into; leftover lines become blocks
    types: frozenset[str]  # definitions kept whole
    comments: frozenset[str]


LANGUAGES: dict[str, _Spec] = {
    "python": _Spec(
        module="tree_sitter_python",
        suffixes=(".py", ".pyi"),
        sep=".",
        functions=frozenset({"function_definition"}),
        containers=frozenset({"class_definition"}),
        namespaces=frozenset(),
        types=frozenset(),
        comments=frozenset({"comment"}),
    ),
    "cpp": _Spec(
        module="tree_sitter_cpp",
        suffixes=(".cc", ".cpp", ".cxx", ".c++", ".c", ".h", ".hh", ".hpp", ".hxx", ".ipp", ".inl"),
        sep="::",
        functions=frozenset({"function_definition"}),
        containers=frozenset({"class_specifier", "struct_specifier", "union_specifier"}),
        namespaces=frozenset({"namespace_definition", "linkage_specification"}),
        types=frozenset({"enum_specifier", "alias_declaration", "concept_definition"}),
        comments=frozenset({"comment"}),
    ),
    "rust": _Spec(
        module="tree_sitter_rust",
        suffixes=(".rs",),
        sep="::",
        functions=frozenset({"function_item"}),
        containers=frozenset({"impl_item", "trait_item"}),
        namespaces=frozenset({"mod_item"}),
        types=frozenset(
            {"struct_item", "enum_item", "union_item", "type_item", "macro_definition"}
        ),
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "go": _Spec(
        module="tree_sitter_go",
        suffixes=(".go",),
        sep=".",
        functions=frozenset({"function_declaration", "method_declaration"}),
        containers=frozenset(),
        namespaces=frozenset(),
        types=frozenset({"type_declaration"}),
        comments=frozenset({"comment"}),
    ),
}
_SUFFIX = {s: lang for lang, spec in LANGUAGES.items() for s in spec.suffixes}
_PARSERS: dict[str, Any] = {}
_CONTENT = re.compile(r"[A-Za-z0-9_]")
_LINE_COMMENT = {
    "python": re.compile(r"#.*$"),
    "cpp": re.compile(r"//.*$"),
    "rust": re.compile(r"//.*$"),
    "go": re.compile(r"//.*$"),
}


def language_for_path(path: str) -> str | None:
    """The chunker language of a file name (``None`` when unsupported).

    Examples:
        >>> language_for_path("src/lib.rs"), language_for_path("README.md")
        ('rust', None)
    """
    dot = path.rfind(".")
    return _SUFFIX.get(path[dot:].lower()) if dot >= 0 else None


def _parser(language: str) -> Any:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {language!r}")
    if language not in _PARSERS:
        spec = LANGUAGES[language]
        try:
            import tree_sitter

            grammar = importlib.import_module(spec.module)
        except ImportError as err:
            raise RetrievalError(
                f"code chunking needs tree-sitter and {spec.module.replace('_', '-')} ({err}); "
                "pip install 'lc-agents[retrieval]'"
            ) from None
        _PARSERS[language] = tree_sitter.Parser(tree_sitter.Language(grammar.language()))
    return _PARSERS[language]


# --------------------------------------------------------------------------- names


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _cpp_function_name(node: Any) -> str:
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return ""
    return re.sub(r"\s+", "", _text(decl.child_by_field_name("declarator")))


def _go_receiver_type(node: Any) -> str:
    recv = node.child_by_field_name("receiver")
    for param in recv.named_children if recv is not None else []:
        typ = _text(param.child_by_field_name("type"))
        return re.sub(r"\[.*\]$", "", typ.lstrip("*").strip())
    return ""


def _name(language: str, node: Any) -> str:
    t = node.type
    if language == "cpp" and t == "function_definition":
        return _cpp_function_name(node)
    if language == "rust" and t == "impl_item":
        return re.sub(r"<.*>$", "", _text(node.child_by_field_name("type")))
    if language == "go" and t == "type_declaration":
        names = [_text(s.child_by_field_name("name")) for s in node.named_children]
        return ", ".join(n for n in names if n)
    if language == "cpp" and t == "linkage_specification":
        return ""
    return _text(node.child_by_field_name("name"))


def _unwrap(language: str, node: Any, spec: _Spec) -> Any:
    """The definition inside a decorator or template wrapper (or ``node`` itself)."""
    if language == "python" and node.type == "decorated_definition":
        return node.child_by_field_name("definition")
    if language == "cpp" and node.type == "template_declaration":
        wanted = spec.functions | spec.containers | spec.types | {"template_declaration"}
        for child in reversed(node.named_children):
            if child.type in wanted:
                return _unwrap(language, child, spec)
        return node
    if language == "cpp" and node.type in ("declaration", "field_declaration"):
        # `class A {...};` and `struct B {...} b;` are declarations holding a type body
        typ = node.child_by_field_name("type")
        if (
            typ is not None
            and typ.type in spec.containers | spec.types
            and (typ.child_by_field_name("body") is not None)
        ):
            return typ
    return node


def _body(node: Any) -> Any:
    return node.child_by_field_name("body")


# --------------------------------------------------------------------------- chunking


@dataclass
class _Unit:
    kind: str
    name: str
    start: int  # 0-based rows, inclusive
    end: int


def _start_with_comments(node: Any, spec: _Spec) -> int:
    start = node.start_point[0]
    prev = node.prev_named_sibling
    while prev is not None and prev.type in spec.comments and _end_row(prev) == start - 1:
        before = prev.prev_sibling
        if before is not None and _end_row(before) >= prev.start_point[0]:
            break  # a trailing comment of the statement on the same row
        start = prev.start_point[0]
        prev = prev.prev_named_sibling
    return start


def _end_row(node: Any) -> int:
    # a node ending at column 0 of a row ends on the previous row (e.g. a Rust line comment)
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def _walk(
    language: str, spec: _Spec, parent: Any, prefix: str, in_type: bool, out: list[_Unit]
) -> list[tuple[int, int]]:
    """Append the units under ``parent``; return the row ranges they claim."""
    claimed: list[tuple[int, int]] = []
    for child in parent.named_children:
        node = _unwrap(language, child, spec)
        t = node.type
        if t in spec.comments:
            continue
        start, end = _start_with_comments(child, spec), _end_row(child)
        name = _name(language, node)
        qual = f"{prefix}{spec.sep}{name}" if prefix and name else (name or prefix)
        if t in spec.functions:
            if language == "go" and t == "method_declaration":
                recv = _go_receiver_type(node)
                qual, kind = (f"{recv}.{name}" if recv else name), "method"
            else:
                kind = "method" if in_type else "function"
            out.append(_Unit(kind, qual, start, end))
            claimed.append((start, end))
        elif t in spec.containers or t in spec.namespaces:
            body = _body(node)
            if body is None:  # a forward declaration or a trait item without body
                if t in spec.containers:
                    out.append(_Unit("class", qual, start, end))
                    claimed.append((start, end))
                continue
            is_type = t in spec.containers
            inner = _walk(language, spec, body, qual, is_type, out)
            kind = "class" if is_type else "block"
            for s, e in _gaps(start, end, inner):
                out.append(_Unit(kind, qual, s, e))
            claimed.append((start, end))
        elif t in spec.types:
            out.append(_Unit("class", qual, start, end))
            claimed.append((start, end))
    return claimed


def _gaps(start: int, end: int, claimed: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Maximal runs of rows in [start, end] not covered by ``claimed``."""
    covered: set[int] = set()
    for s, e in claimed:
        covered.update(range(s, e + 1))
    run_start = None
    for row in range(start, end + 2):
        free = row <= end and row not in covered
        if free and run_start is None:
            run_start = row
        elif not free and run_start is not None:
            yield run_start, row - 1
            run_start = None


def chunk_source(
    source: str, language: str, path: str = "", *, max_lines: int = 120
) -> list[CodeChunk]:
    """Cut one source file into function, method, class and block chunks.

    Args:
        source: the file's text.
        language: one of ``"python"``, ``"cpp"``, ``"rust"``, ``"go"``.
        path: the file's path, stored in each chunk.
        max_lines: longer units are split into windows of at most this many lines.

    Returns:
        Chunks in file order (by first line). Chunks never share a line, except where
        two definitions share one source line.

    Raises:
        ValueError: an unknown language or ``max_lines < 1``.
        RetrievalError: tree-sitter or the language's grammar is not installed.
    """
    if max_lines < 1:
        raise ValueError(f"max_lines must be >= 1, got {max_lines}")
    spec = LANGUAGES.get(language)
    if spec is None:
        raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {language!r}")
    if not source:
        return []
    # rows as tree-sitter counts them: only "\n" ends a line ("\r\n" is "\n" with a
    # "\r" left at the row's end, dropped from the text); form feeds, "\r" alone,
    # U+2028 and the other characters str.splitlines() breaks at stay inside their row
    lines = [line.removesuffix("\r") for line in source.split("\n")]
    tree = _parser(language).parse(source.encode("utf-8"))
    units: list[_Unit] = []
    claimed = _walk(language, spec, tree.root_node, "", False, units)
    units.extend(_Unit("block", "", s, e) for s, e in _gaps(0, len(lines) - 1, claimed))
    units.sort(key=lambda u: (u.start, u.end))
    chunks: list[CodeChunk] = []
    spans: dict[tuple[int, int], int] = {}  # span -> index in chunks, to merge twins
    for u in units:
        s, e = u.start, min(u.end, len(lines) - 1)
        while s <= e and not lines[s].strip():  # trim blank lines at both ends
            s += 1
        while e >= s and not lines[e].strip():
            e -= 1
        strip = _LINE_COMMENT[language]
        if s > e or not any(_CONTENT.search(strip.sub("", lines[r])) for r in range(s, e + 1)):
            continue  # only brackets, blank lines and end-of-line comments
        if (s, e) in spans:  # two definitions on the same line(s): one chunk, both names
            i = spans[(s, e)]
            twin = chunks[i]
            chunks[i] = CodeChunk(**{**twin.__dict__, "name": f"{twin.name}, {u.name}"})
            continue
        spans[(s, e)] = len(chunks)
        windows = [(a, min(a + max_lines - 1, e)) for a in range(s, e + 1, max_lines)]
        for i, (a, b) in enumerate(windows):
            chunks.append(
                CodeChunk(
                    path=path,
                    language=language,
                    kind=u.kind,
                    name=u.name,
                    start_line=a + 1,
                    end_line=b + 1,
                    text="\n".join(lines[a : b + 1]),
                    part=i + 1 if len(windows) > 1 else 0,
                )
            )
    return chunks

"""tree-sitter chunking of small snippets in Python, C++, Rust and Go (exact names and spans)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_agents.code import CodeChunk, chunk_source, language_for_path

PY = '''"""Module doc."""
import os

X = 1  # trailing


# helper comment
@decorator
def top(a, b):
    return a + b


class Outer:
    """Doc."""

    attr = 3

    def method(self):
        def inner():
            pass
        return inner

    class Inner:
        def deep(self):
            return 1


if __name__ == "__main__":
    top(1, 2)
'''
CPP = """#include <vector>

namespace geo {
// Area of a rectangle.
template <typename T>
T area(T w, T h) {
    return w * h;
}

class Box {
  public:
    int volume() const {
        return w * h * d;
    }
    int w, h, d;
};
}  // namespace geo

int geo::Box::get() { return 0; }

struct Point { int x; int y; };
enum Color { Red, Green };
"""
RS = """use std::fmt;

/// Adds one.
fn add_one(x: i32) -> i32 {
    x + 1
}

pub struct Stack<T> {
    items: Vec<T>,
}

impl<T> Stack<T> {
    pub fn push(&mut self, x: T) {
        self.items.push(x);
    }
}

impl fmt::Display for Stack<i32> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "stack")
    }
}

trait Shape {
    fn area(&self) -> f64;
    fn name(&self) -> String {
        String::from("shape")
    }
}

mod util {
    pub fn helper() -> u8 { 1 }
}
"""
GO = """package main

import "fmt"

// Add adds two ints.
func Add(a, b int) int {
	return a + b
}

type Stack struct {
	items []int
}

// Push appends.
func (s *Stack) Push(x int) {
	s.items = append(s.items, x)
}

func main() {
	fmt.Println(Add(1, 2))
}
"""


def spans(src, lang):
    return [(c.kind, c.name, c.start_line, c.end_line) for c in chunk_source(src, lang, "f")]


def test_python_functions_methods_nested_classes_and_blocks():
    assert spans(PY, "python") == [
        ("block", "", 1, 4),
        ("function", "top", 7, 10),  # the comment and decorator above belong to it
        ("class", "Outer", 13, 16),  # header, docstring, class attribute
        ("method", "Outer.method", 18, 21),  # the nested def stays inside
        ("class", "Outer.Inner", 23, 23),
        ("method", "Outer.Inner.deep", 24, 25),
        ("block", "", 28, 29),
    ]


def test_cpp_namespaces_templates_classes_and_out_of_class_definitions():
    assert spans(CPP, "cpp") == [
        ("block", "", 1, 1),
        ("block", "geo", 3, 3),
        ("function", "geo::area", 4, 8),  # comment + template header
        ("class", "geo::Box", 10, 11),
        ("method", "geo::Box::volume", 12, 14),
        ("class", "geo::Box", 15, 16),  # fields and closing brace
        ("function", "geo::Box::get", 19, 19),
        ("class", "Point", 21, 21),
        ("class", "Color", 22, 22),
    ]  # "}  // namespace geo" holds no code and is dropped


def test_rust_items_impls_traits_and_modules():
    assert spans(RS, "rust") == [
        ("block", "", 1, 1),
        ("function", "add_one", 3, 6),  # with its doc comment
        ("class", "Stack", 8, 10),
        ("class", "Stack", 12, 12),
        ("method", "Stack::push", 13, 15),
        ("class", "Stack", 18, 18),  # trait impls are named by their type
        ("method", "Stack::fmt", 19, 21),
        ("class", "Shape", 24, 25),  # the signature without body stays in the trait
        ("method", "Shape::name", 26, 28),
        ("block", "util", 31, 31),
        ("function", "util::helper", 32, 32),
    ]


def test_go_functions_methods_and_types():
    assert spans(GO, "go") == [
        ("block", "", 1, 3),
        ("function", "Add", 5, 8),
        ("class", "Stack", 10, 12),
        ("method", "Stack.Push", 14, 17),  # receiver type, pointer stripped
        ("function", "main", 19, 21),
    ]


@pytest.mark.parametrize(("src", "lang"), [(PY, "python"), (CPP, "cpp"), (RS, "rust"), (GO, "go")])
def test_chunk_text_is_exactly_its_lines_and_chunks_do_not_overlap(src, lang):
    lines = src.splitlines()
    chunks = chunk_source(src, lang, "pkg/file")
    seen: set[int] = set()
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.path == "pkg/file"
        assert c.language == lang
        rows = set(range(c.start_line, c.end_line + 1))
        assert not rows & seen
        seen |= rows
    assert [c.start_line for c in chunks] == sorted(c.start_line for c in chunks)


def test_long_units_are_split_into_windows_that_keep_the_name():
    body = "\n".join(f"    x{i} = {i}" for i in range(25))
    src = f"def big():\n{body}\n    return x0\n"
    chunks = chunk_source(src, "python", max_lines=10)
    assert [(c.name, c.part, c.start_line, c.end_line) for c in chunks] == [
        ("big", 1, 1, 10),
        ("big", 2, 11, 20),
        ("big", 3, 21, 27),
    ]


def test_two_definitions_on_one_line_make_one_chunk_with_both_names():
    (c,) = chunk_source("int a() { return 1; } int b() { return 2; }\n", "cpp")
    assert (c.kind, c.name, c.start_line, c.end_line) == ("function", "a, b", 1, 1)


def test_broken_syntax_still_yields_chunks_and_empty_source_yields_none():
    src = "def ok():\n    return 1\n\ndef broken(:\n    pass\n"
    assert next(c.name for c in chunk_source(src, "python") if c.kind == "function") == "ok"
    assert chunk_source("", "python") == []


def test_render_header_and_id():
    c = CodeChunk("src/a.py", "python", "method", "A.f", 3, 4, "def f(self):\n    pass")
    assert c.id == "src/a.py:3-4"
    assert c.render() == "### src/a.py:L3-4 method A.f\ndef f(self):\n    pass"


def test_languages_by_suffix_and_unknown_language_errors():
    assert [language_for_path(p) for p in ("a.py", "b.HPP", "c.cc", "d.rs", "e.go", "f.js")] == [
        "python",
        "cpp",
        "cpp",
        "rust",
        "go",
        None,
    ]
    with pytest.raises(ValueError, match="language must be one of"):
        chunk_source("x", "java")
    with pytest.raises(ValueError, match="max_lines"):
        chunk_source("x", "python", max_lines=0)


# --------------------------------------------------------------------------- line accounting
# characters str.splitlines() breaks at but tree-sitter does not (it counts "\n" only)
ODD_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\r"


@st.composite
def sources_with_odd_line_breaks(draw):
    """Python files whose comments hold odd line breaks, with "\\n" or "\\r\\n" endings."""
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    filler = st.text(alphabet="ab " + ODD_BREAKS, max_size=8)
    lines: list[str] = []
    for i in range(draw(st.integers(1, 5))):
        for _ in range(draw(st.integers(0, 2))):
            lines.append("# " + draw(filler))
        lines += ["", f"def f{i}(x):", f"    y = x  # {draw(filler)}", f"    return y + {i}", ""]
    return eol.join(lines) + eol


@settings(max_examples=60, deadline=None)
@given(sources_with_odd_line_breaks())
def test_line_numbers_count_newlines_only_like_tree_sitter(source):
    rows = [r.removesuffix("\r") for r in source.split("\n")]
    chunks = chunk_source(source, "python", "m.py")
    for c in chunks:
        assert c.text == "\n".join(rows[c.start_line - 1 : c.end_line])
    functions = {c.name: c for c in chunks if c.kind == "function"}
    defs = [i for i, r in enumerate(rows) if r.startswith("def f")]
    assert sorted(functions) == sorted(rows[i][4:6] for i in defs)
    for i in defs:
        assert functions[rows[i][4:6]].start_line == i + 1


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\r", "\x85"])
def test_an_odd_line_break_does_not_shift_later_chunks(odd):
    source = f"# a{odd}b\nX = 1\n\n\ndef g():\n    return 1\n"
    (block, func) = chunk_source(source, "python")
    assert (block.start_line, block.end_line, block.text) == (1, 2, f"# a{odd}b\nX = 1")
    assert (func.name, func.start_line, func.end_line) == ("g", 5, 6)
    assert func.text == "def g():\n    return 1"
    crlf = chunk_source(source.replace("\n", "\r\n"), "python")
    assert [(c.start_line, c.end_line, c.text) for c in crlf] == [
        (c.start_line, c.end_line, c.text) for c in (block, func)
    ]

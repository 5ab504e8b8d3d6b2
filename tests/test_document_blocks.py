"""The pieces of the markdown document model's line grouping and rendering (nodes/lib/summarize/
document.py), one table each: whether a line continues the logical line before it, a logical
line's prefix, a line's and a block's rendering for a selection."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.summarize import document as D  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


LONG = "This line is long enough to be hard-wrapped by an editor at col"  # 64 characters, no terminal mark


@pytest.mark.parametrize("prev, in_item, line, expected", [
    case("a list item starts anew", "- one", True, "- two", False),
    case("a numbered item starts anew", "text.", False, "2. two", False),
    case("a label starts anew", "text", False, "Status: done", False),
    case("indented inside a list item", "- one", True, "  more of one", True),
    case("indented outside a list item, capitalised", "Short.", False, "  More", False),
    case("lower case: a hard-wrapped sentence", "Short", False, "wrapped on", True),
    case("after a long line without a terminal mark", LONG, False, "Capital next", True),
    case("after a long line ending a sentence", LONG + ".", False, "Capital next", False),
    case("after a short line", "Short", False, "Capital next", False),
    case("after a long line, a digit", LONG, False, "42 things", False),
])
def test_continues(prev, in_item, line, expected):
    assert D._continues(line, prev, in_item) is expected


@pytest.mark.parametrize("lines, expected", [
    case("an item and its continuation, then a paragraph line", ["- one", "  more", "Next."],
         [("- ", "- one\n  more"), ("", "Next.")]),
    case("a wrapped sentence", ["It goes", "on here."], [("", "It goes\non here.")]),
    case("a quote", ["> said"], [("> ", "> said")]),
])
def test_logical_lines(lines, expected):
    assert D._logical_lines(lines) == expected


@pytest.mark.parametrize("full, expected", [
    case("a list marker", "- item", "- "), case("a number", "3. item", "3. "), case("a quote", "> q", "> "),
    case("an indent", "    code-ish", "    "), case("nothing", "plain", ""),
])
def test_line_prefix(full, expected):
    assert D._line_prefix(full) == expected


DOC = D.build("# T\n- First one. Second one.\n- Other.\n\n```py\na = 1\n\nb = 2\n```")
ITEM, OTHER = DOC.sections[1].blocks[0].lines
CODE = DOC.sections[1].blocks[1]


@pytest.mark.parametrize("sel, expected", [
    case("every unit: the line as written", set(ITEM.units), "- First one. Second one."),
    case("some: the prefix and the chosen ones", {ITEM.units[1]}, "- Second one."),
    case("none", set(), None),
])
def test_line_text(sel, expected):
    assert D._line_text(DOC, ITEM, sel) == expected


@pytest.mark.parametrize("block, sel, expected", [
    case("a text block: its chosen lines", DOC.sections[1].blocks[0], {ITEM.units[0], OTHER.units[0]},
         "- First one.\n- Other."),
    case("a text block with nothing chosen", DOC.sections[1].blocks[0], set(), None),
    case("a code block without its fence", CODE, {CODE.code.units[0]}, None),
    case("a code block: its fence and every line", CODE, {CODE.code.fence, CODE.code.units[0], CODE.code.units[2]},
         "```py\na = 1\n\nb = 2\n```"),
])
def test_block_text(block, sel, expected):
    assert D._block_text(DOC, block, sel) == expected


def test_render_doc_joins_heading_and_blocks_with_blank_lines():
    heading = DOC.sections[1].heading
    assert D.render_doc(DOC, {heading, OTHER.units[0]}) == "# T\n\n- Other."
    assert D.render_doc(DOC, set()) == ""

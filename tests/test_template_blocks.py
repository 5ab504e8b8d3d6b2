"""How the template parser adds one tag to the open sections (nodes/lib/template.py
``_add_tag``), one table: the frames after it, or the TemplateError it raises."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib import template as T


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def root(*children) -> list:
    return [(None, None, 0, list(children))]


@pytest.mark.parametrize("frames, sigil, tag, expected", [
    case("a variable", root(), "", "a.b", root(("var", ("a", "b"), None))),
    case("a raw variable", root(), "&", "x", root(("raw", ("x",), None))),
    case("the current item", root(), "", ".", root(("var", (), None))),
    case("a section opens a frame", root(), "#", "s", [*root(), ("section", "s", 7, [])]),
    case("a closing tag folds the frame into its parent", [*root(), ("inverted", "s", 0, [("var", ("v",), None)])], "/",
         "s", root(("inverted", ("s",), (("var", ("v",), None),)))),
])
def test_add_tag(frames, sigil, tag, expected):
    T._add_tag(frames, sigil, tag, "0123456789", 7, "t.md")
    assert frames == expected


@pytest.mark.parametrize("frames, sigil, tag, message", [
    case("partials", root(), ">", "p", "partials ({{> ...}}) are not supported"),
    case("delimiter changes", root(), "=", "<% %>", "delimiter changes ({{= ...}}) are not supported"),
    case("a bad name", root(), "", "a b", "bad tag name 'a b'"),
    case("a stray closing tag", root(), "/", "s", "closing tag {{/s}} has no open section"),
    case("a mismatched closing tag", [*root(), ("section", "s", 0, [])], "/", "t",
         "closing tag {{/t}} does not match {{#s}} opened on line 1"),
    case("too deep", root() * (T.MAX_NESTING + 1), "#", "s", f"sections nested more than {T.MAX_NESTING} deep"),
])
def test_add_tag_errors(frames, sigil, tag, message):
    with pytest.raises(T.TemplateError) as error:
        T._add_tag(frames, sigil, tag, "0123456789", 7, "t.md")
    assert message in str(error.value)

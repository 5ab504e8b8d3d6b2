"""The steps of the extractive / headings priority order (nodes/lib/summarize/markdown.py,
``_priority_order``), one table each, on small documents: the headings by level, the outline
start (frontmatter first or after the headings, squeezed to a lone title), the first sentences
(fact-carrying ones first), the code and key sentences that follow, repeats dropped."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.summarize import markdown as M  # noqa: E402
from ctxengine.nodes.lib.summarize.document import build  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


DOC = """\
---
title: Auth
---
# Auth
Intro sentence. Second intro sentence.

## Login
Login uses argon2id. It is fixed in PROJ-123 since v1.2.0. Third one.

### Detail
Deep sentence.

## Logout
```python
def logout():
    pass
```
Logout clears the session."""


def texts(doc, ids):
    return [doc.texts[u] for u in ids]


def test_heading_ids_shallow_levels_first_then_in_order():
    doc = build(DOC)
    assert texts(doc, M._heading_ids(doc)) == ["# Auth", "## Login", "## Logout", "### Detail"]


@pytest.mark.parametrize("source, early_fm, squeezed, expected", [
    case("frontmatter first, every heading", DOC, True, False,
         ["FM", "# Auth", "## Login", "## Logout", "### Detail"]),
    case("frontmatter after the headings", DOC, False, False, ["# Auth", "## Login", "## Logout", "### Detail", "FM"]),
    case("squeezed: the lone title only", DOC, False, True, ["# Auth", "FM"]),
    case("squeezed with two top headings: none", "# A\nx.\n# B\ny.", False, True, []),
    case("no frontmatter", "# A\nx.", False, False, ["# A"]),
])
def test_outline_order(source, early_fm, squeezed, expected):
    doc = build(source)
    order = M._outline_order(doc, M._heading_ids(doc), early_fm, squeezed)
    assert ["FM" if u == doc.frontmatter else doc.texts[u] for u in order] == expected


@pytest.mark.parametrize("key_sentences, expected", [
    case("key sentences: fact-carrying sentences first, then first sentences", True,
         ["It is fixed in PROJ-123 since v1.2.0.", "Intro sentence.", "Login uses argon2id.", "Deep sentence.",
          "Logout clears the session."]),
    case("headings summary: first sentences only", False,
         ["Intro sentence.", "Login uses argon2id.", "Deep sentence.", "Logout clears the session."]),
])
def test_first_sentence_order(key_sentences, expected):
    doc = build(DOC)
    order = M._first_sentence_order(doc, M._first_paragraphs(doc), key_sentences)
    assert [t.strip() for t in texts(doc, order)] == expected


@pytest.mark.parametrize("squeezed, first", [
    case("not squeezed: the code block's first line leads", False, "def logout():"),
    case("squeezed: no code lead, key sentences first", True, None),
])
def test_key_order(squeezed, first):
    doc = build(DOC)
    costs = [1] * len(doc.texts)
    got = texts(doc, M._key_order(doc, [], costs, 1000, M._first_paragraphs(doc), squeezed))
    code = [t for t in got if t.strip() in ("def logout():", "pass")]
    assert sorted(t.strip() for t in code) == ["def logout():", "pass"]  # every code line comes somewhere
    if first is None:
        assert got[0].strip() not in ("def logout():", "pass")
    else:
        assert got[0].strip() == first


@pytest.mark.parametrize("order, expected", [
    case("repeats dropped, first place kept", [3, 1, 3, 2, 1], [3, 1, 2]),
    case("none", [], []),
])
def test_without_repeats(order, expected):
    assert M._without_repeats(order) == expected


@pytest.mark.parametrize("max_tokens, squeezed", [
    case("room for the outline", 1000, False),
    case("the outline over half the budget: squeezed", 10, True),
])
def test_priority_order_squeezes_a_tight_budget(max_tokens, squeezed):
    doc = build(DOC)
    costs = [5] * len(doc.texts)
    order, got = M._priority_order(doc, DOC, costs, max_tokens, True, True)
    assert got is squeezed and len(order) == len(set(order))
    assert ("### Detail" in texts(doc, order[:6])) is not squeezed

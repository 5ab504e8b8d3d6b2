"""The steps cross-reference mending is made of (nodes/lib/crossref.py), one table each: the
target of a removed section, the edits found kept without overlaps, and a section mended (or,
immutable, left with a note per reference)."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib import crossref as C
from ctxengine.nodes.types import Section, Source


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def sec(key: str, content: str, priority: int = 60) -> Section:
    return Section(key=key, title=key.title(), kind="reference", content=content, priority=priority,
                   pool="references", sources=(Source("file", f".planning/{key}.md"),))


@pytest.mark.parametrize("info, still, taken_names, expected", [
    case("title and file names; an odd action is dropped",
         {"title": "Architecture", "action": "moved", "location": ".planning/arch.md"}, None, set(),
         ("dropped", ["Architecture", ".planning/arch.md", "arch.md", "arch"], {"architecture"})),
    case("a name a present section answers to is not used",
         {"title": "Intro", "action": "summarized", "location": ""}, None, {"intro"}, ("summarized", [], {"intro"})),
    case("headings and the part still listed add anchors",
         {"title": "A", "action": "cut", "headings": ["Deep Dive"]}, sec("a", "## Kept part"), set(),
         ("cut", [], {"a", "deep-dive", "kept-part"})),
])
def test_target_of(info, still, taken_names, expected):
    target = C._target_of("a", info, still, taken_names, {"taken"})
    assert (target.action, target.names, target.slugs) == expected


@pytest.mark.parametrize("spans, expected", [
    case("sorted by start", [(5, 7), (0, 2)], [(0, 2), (5, 7)]),
    case("an overlapping later edit is left out", [(0, 4), (2, 6)], [(0, 4)]),
    case("the longest at one start", [(3, 4), (3, 8)], [(3, 8)]),
    case("touching edits both stay", [(0, 3), (3, 5)], [(0, 3), (3, 5)]),
])
def test_without_overlaps(spans, expected):
    assert [item[:2] for item in C._without_overlaps([(a, b, "", "", None) for a, b in spans])] == expected


def test_mended_makes_the_edits_and_notes_each():
    target = C._Target("arch", "Architecture", "dropped", "a.md")
    section, notes = C._mended(sec("intro", "see X and see X"), [(0, 5, "see Y", "see X", target),
                                                                 (10, 15, "see Z", "see X", target)])
    assert section.content == "see Y and see Z"
    assert notes == ["intro: pointed 'see X' at a.md", "intro: pointed 'see X' at a.md"]


def test_mended_leaves_an_immutable_section_and_says_so():
    target = C._Target("arch", "Architecture", "summarized", "")
    section, notes = C._mended(sec("rules", "see X", priority=95), [(0, 5, "see Y", "see X", target)])
    assert section.content == "see X"
    assert notes == ["rules: immutable section left unchanged; it refers to summarized 'Architecture' ('see X')"]


def test_name_patterns_are_none_without_names():
    assert C._name_patterns([]) == (None, None)
    en, zh = C._name_patterns(["Architecture"])
    assert en.search("(see the `Architecture` section)").group("name") == "Architecture"
    assert zh.search("详见《Architecture》一节").group("noun") == "一节"

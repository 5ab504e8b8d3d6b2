"""Cross-reference mending (nodes/lib/crossref.py): references to dropped or summarized
sections are pointed at their full text; present sections and immutable ones are left alone."""

from __future__ import annotations

import copy

from ctxengine.nodes.lib.crossref import mend_cross_references
from ctxengine.nodes.types import Section, Source

ARCH_LOC = ".planning/references/arch.md"


def sec(key: str, title: str, content: str, priority: int = 60, location: str | None = None) -> Section:
    return Section(
        key=key,
        title=title,
        kind="reference",
        content=content,
        priority=priority,
        pool="references",
        sources=(Source("file", location or f".planning/{key}.md"),),
    )


def dropped(title: str = "Architecture", location: str | None = ARCH_LOC, **extra) -> dict:
    return {"arch": {"title": title, "action": "dropped", "location": location, **extra}}


def mend_one(content: str, removed: dict, priority: int = 60):
    sections = [sec("intro", "Intro", content, priority)]
    out, notes = mend_cross_references(sections, removed)
    return out[0].content, notes


def test_see_x_points_at_the_file():
    text, notes = mend_one("For the layout see Architecture. Then continue.", dropped())
    assert text == f"For the layout see Architecture (not included; full text in {ARCH_LOC}). Then continue."
    assert notes == [f"intro: pointed 'see Architecture' at {ARCH_LOC}"]


def test_english_patterns_case_insensitive_and_by_file_name():
    text, notes = mend_one(
        "As described in the architecture section, we split stages. Refer to arch.md for details. "
        "See ARCH too.",
        dropped(),
    )
    note = f"(not included; full text in {ARCH_LOC})"
    assert f"As described in the architecture section {note}, we split stages." in text
    assert f"Refer to arch.md {note} for details." in text
    assert f"See ARCH {note} too." in text
    assert len(notes) == 3


def test_parenthesised_see_x_gets_the_note_inside_the_parentheses():
    text, _ = mend_one("The engine is pure (see Architecture) and fast.", dropped())
    assert text == f"The engine is pure (see Architecture \u2014 not included; full text in {ARCH_LOC}) and fast."


def test_summarized_and_cut_sections_get_the_summarized_note():
    for action in ("summarized", "cut"):
        removed = {"arch": {"title": "Architecture", "action": action, "location": ARCH_LOC}}
        text, notes = mend_one("See Architecture for the stages.", removed)
        assert text == f"See Architecture (summarized; full text in {ARCH_LOC}) for the stages."
        assert notes == [f"intro: marked 'See Architecture' as {action} (full text in {ARCH_LOC})"]


def test_dropped_without_location_is_marked_not_included():
    text, notes = mend_one("See Architecture and [the stages](#architecture).", dropped(location=None))
    assert text == "See Architecture (not included) and the stages."
    assert len(notes) == 2 and "no location" in notes[0]


def test_markdown_anchor_to_title_and_inner_heading_becomes_a_file_link():
    removed = dropped(headings=["Database schema", "Stage order"])
    text, notes = mend_one("Read [the schema](#database-schema), [stages](#stage-order) and [arch](#architecture).", removed)
    assert text == f"Read [the schema]({ARCH_LOC}), [stages]({ARCH_LOC}) and [arch]({ARCH_LOC})."
    assert notes[0] == f"intro: pointed '[the schema](#database-schema)' at {ARCH_LOC}"


def test_anchor_headings_taken_from_the_removed_content():
    removed = dropped(content="# Architecture\n\n## Budget pools\n\ntext")
    text, _ = mend_one("See [pools](#budget-pools).", removed)
    assert text == f"See [pools]({ARCH_LOC})."


def test_anchor_with_spaces_in_location_is_bracketed():
    text, _ = mend_one("[x](#architecture)", dropped(location="docs/my arch.md"))
    assert text == "[x](<docs/my arch.md>)"


def test_anchor_to_a_summarized_section_keeps_the_link_and_adds_the_note():
    removed = {"arch": {"title": "Architecture", "action": "summarized", "location": ARCH_LOC}}
    text, _ = mend_one("Read [arch](#architecture).", removed)
    assert text == f"Read [arch](#architecture) (summarized; full text in {ARCH_LOC})."


def test_chinese_references():
    removed = {"zh": {"title": "架构设计", "action": "dropped", "location": "docs/架构设计.md"}}
    text, notes = mend_one("详见架构设计。参见《架构设计》一节。", removed)
    assert text == "详见架构设计（未包含；全文见 docs/架构设计.md）。参见《架构设计》一节（未包含；全文见 docs/架构设计.md）。"
    assert len(notes) == 2
    removed["zh"]["action"] = "summarized"
    text, _ = mend_one("详见 架构设计", removed)
    assert text == "详见 架构设计（已摘要；全文见 docs/架构设计.md）"


def test_as_above_mends_when_the_preceding_section_was_removed():
    sections = [
        sec("arch", "Architecture", "Short summary.", location=ARCH_LOC),
        sec("next", "Next", "如上所述，阶段是纯函数。As mentioned above, nodes are pure."),
    ]
    removed = {"arch": {"title": "Architecture", "action": "summarized", "location": ARCH_LOC}}
    out, notes = mend_cross_references(sections, removed)
    assert out[1].content == (
        f"如上所述（前文“Architecture”已摘要；全文见 {ARCH_LOC}），阶段是纯函数。"
        f"As mentioned above (preceding section 'Architecture' summarized; full text in {ARCH_LOC}), nodes are pure."
    )
    assert len(notes) == 2
    # a dropped section is placed by the original order
    out, notes = mend_cross_references([sections[1]], dropped(), order=["arch", "next"])
    assert "如上所述（前文“Architecture”未包含；全文见" in out[0].content
    # the preceding section is present unchanged: nothing to mend
    kept = [sec("arch", "Architecture", "Full text."), sections[1]]
    out, notes = mend_cross_references(kept, {"other": {"title": "Other", "action": "dropped", "location": "o.md"}})
    assert out[1].content == sections[1].content and notes == []


def test_nothing_removed_changes_nothing():
    sections = [sec("a", "A", "see Architecture and [x](#architecture)"), sec("b", "B", "如上所述")]
    out, notes = mend_cross_references(sections, {})
    assert [s.content for s in out] == [s.content for s in sections]
    assert notes == []


def test_references_to_sections_still_present_are_left_alone():
    sections = [
        sec("arch", "Architecture", "# Architecture\n\n## Pools\n", location=ARCH_LOC),
        sec("intro", "Intro", "See Architecture, see [pools](#pools), see Glossary."),
    ]
    removed = {"gloss": {"title": "Glossary", "action": "dropped", "location": "g.md"}}
    out, notes = mend_cross_references(sections, removed)
    assert out[1].content == "See Architecture, see [pools](#pools), see Glossary (not included; full text in g.md)."
    assert out[0] is sections[0]
    assert notes == ["intro: pointed 'see Glossary' at g.md"]


def test_immutable_sections_stay_byte_identical_and_are_reported():
    content = "Always see Architecture and [arch](#architecture) first."
    text, notes = mend_one(content, dropped(), priority=95)
    assert text == content
    assert len(notes) == 2
    assert all(n.startswith("intro: immutable section left unchanged") for n in notes)


def test_fenced_code_is_not_touched_and_mending_twice_is_stable():
    content = "See Architecture.\n\n```\nsee Architecture\n[a](#architecture)\n```\n"
    sections = [sec("intro", "Intro", content)]
    once, notes = mend_cross_references(sections, dropped())
    assert once[0].content == f"See Architecture (not included; full text in {ARCH_LOC}).\n\n```\nsee Architecture\n[a](#architecture)\n```\n"
    assert len(notes) == 1
    twice, notes2 = mend_cross_references(once, dropped())
    assert twice[0].content == once[0].content and notes2 == []


def test_inputs_are_not_mutated_and_new_sections_are_returned():
    sections = [sec("intro", "Intro", "see Architecture"), sec("other", "Other", "nothing")]
    removed = dropped()
    before_sections = copy.deepcopy(sections)
    before_removed = copy.deepcopy(removed)
    out, _ = mend_cross_references(sections, removed)
    assert sections == before_sections and removed == before_removed
    assert out is not sections
    assert out[0] is not sections[0] and out[0].content != sections[0].content
    assert out[0].key == "intro" and out[0].priority == 60 and out[0].sources == sections[0].sources
    assert out[1] is sections[1]


def test_a_section_does_not_mend_references_to_itself():
    removed = {"intro": {"title": "Intro", "action": "summarized", "location": "intro.md"}}
    sections = [sec("intro", "Intro", "See Intro below and [top](#intro).")]
    out, notes = mend_cross_references(sections, removed)
    assert out[0].content == sections[0].content and notes == []


def test_names_do_not_match_inside_longer_words_or_other_files():
    text, notes = mend_one("see Architectures, see arch.mdx, see arch-v2", dropped())
    assert text == "see Architectures, see arch.mdx, see arch-v2"
    assert notes == []


def test_url_location():
    removed = {"u": {"title": "API Guide", "action": "dropped", "location": "https://example.com/docs/api-guide.md"}}
    text, _ = mend_one("Refer to the API guide. See api-guide.", removed)
    assert text == (
        "Refer to the API guide (not included; full text in https://example.com/docs/api-guide.md). "
        "See api-guide (not included; full text in https://example.com/docs/api-guide.md)."
    )

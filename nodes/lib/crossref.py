"""Mending cross-references to sections that truncation dropped, summarized or cut.

When a section leaves the context (or shrinks), text elsewhere that points at it ("see
Architecture", "详见 架构", ``[the schema](#database-schema)``, "如上所述") would send the model
looking for something that is not there. :func:`mend_cross_references` finds such references
in the remaining sections and points them at the full text instead:

* dropped, with a location:   ``see X`` -> ``see X (not included; full text in <location>)``,
  ``[text](#anchor)`` -> ``[text](<location>)``
* dropped, without location:  ``see X`` -> ``see X (not included)``, ``[text](#anchor)`` -> ``text``
* summarized or cut:          ``see X`` -> ``see X (summarized; full text in <location>)``, the
  anchor link is kept and the same note follows it

Chinese references get the note in Chinese (``详见 X（未包含；全文见 <location>）``).
"如上所述" / "as mentioned above" refers to what precedes: it is mended when the section
before it (in the original order when ``order`` is given, else in the list) was removed or
summarized, or when its own section was summarized.

References are recognised by name: a removed section's title, the file name of its location
(stem and full name) or the location itself, case-insensitively; anchors by the slug
(markdown.slugify) of its title or of a heading inside it. A name or slug that a section
still present unchanged also has is left alone. Sections of tier "immutable" stay
byte-identical: a reference found in one is only reported. Text inside fenced code blocks is
never changed. Mending twice changes nothing more.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence
from urllib.parse import urlparse

from ..types import IMMUTABLE, Section
from .fences import code_spans
from .markdown import headings as md_headings
from .markdown import slugify
from .regex import lazy_regex

__all__ = ["mend_cross_references", "mends_by_section", "ACTIONS", "MEND_STEP"]

#: The actions a removed entry may have.
ACTIONS = ("dropped", "summarized", "cut")
#: The ledger's step and action of a mended reference (the node that mends them is crossref_mending).
MEND_STEP, MEND_ACTION = "crossref_mending", "mended"
_UNCHANGED = "immutable section left unchanged"

_VERBS_EN = (
    r"see(?:\s+also)?|refer\s+to"
    r"|(?:as\s+)?(?:described|explained|documented|detailed|outlined|defined|shown|covered)\s+in"
)
_VERBS_ZH = r"详见|参见|请参阅|参阅|请参考|请见"
_OPEN = "\"'\u201c\u2018`*_"
_CLOSE = "\"'\u201d\u2019`*_"
_NOUN_EN = r"\s+(?:section|document|doc|file|page|chapter|guide|notes?)\b"
_NOUN_ZH = r"一节|一章|章节|部分|文档|文件|小节"
_ABOVE_EN = lazy_regex(
    r"\bas\s+(?:mentioned|described|noted|discussed|shown|explained|outlined)\s+above\b", re.I
)
_ABOVE_ZH = lazy_regex(r"如上所述|如前所述")
_ANCHOR = lazy_regex(r"(?<!!)\[(?P<text>[^\]\n]+)\]\(#(?P<anchor>[^)\s]+)\)")
# the note this module appends (so mending twice changes nothing more)
_ALREADY = lazy_regex(
    r"\s*(?:[(\uff08]|\u2014)\s*(?:not included|summarized|preceding section|this section"
    r"|\u672a\u5305\u542b|\u5df2\u6458\u8981|\u524d\u6587|\u672c\u8282)"  # 未包含 已摘要 前文 本节
)


@dataclass
class _Target:
    key: str
    title: str
    action: str
    location: str
    names: list[str] = field(default_factory=list)
    slugs: set[str] = field(default_factory=set)

    @property
    def dropped(self) -> bool:
        return self.action == "dropped"


def _location_names(location: str) -> list[str]:
    if not location:
        return []
    path = urlparse(location).path if re.match(r"^[a-z][a-z0-9+.-]*://", location, re.I) else location
    base = posixpath.basename(path.replace("\\", "/").rstrip("/"))
    stem = base.rsplit(".", 1)[0] if "." in base.strip(".") else base
    return [location, base, stem]


def _usable(name: str) -> bool:
    name = name.strip()
    if not name:
        return False
    return len(name) >= (3 if name.isascii() else 2)


def _section_names(section: Section) -> set[str]:
    names = {section.title.strip().lower()}
    for src in section.sources:
        names.update(n.lower() for n in _location_names(src.location))
    return {n for n in names if n}


def _section_slugs(title: str, content: str) -> set[str]:
    slugs = {slugify(title)} if title.strip() else set()
    try:
        slugs.update(slugify(t) for _, t, _ in md_headings(content or ""))
    except Exception:  # pragma: no cover - headings() does not raise on text
        pass
    slugs.discard("")
    return slugs


def _in_spans(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _name_pattern(names: Sequence[str]) -> str:
    parts = []
    for name in sorted(set(names), key=lambda n: (-len(n), n.lower())):
        tail = r"(?![\w-]|\.\w)" if name[-1].isascii() and (name[-1].isalnum() or name[-1] == "_") else ""
        parts.append(re.escape(name) + tail)
    return "|".join(parts)


def _targets(sections: Sequence[Section], removed: Mapping[str, Mapping]) -> list[_Target]:
    """A target per removed section: the names and anchors that refer to it, less those a
    section still present (and not removed) answers to."""
    taken_names: set[str] = set()
    taken_slugs: set[str] = set()
    for s in sections:
        if s.key not in removed:
            taken_names |= _section_names(s)
            taken_slugs |= _section_slugs(s.title, s.content)
    current = {s.key: s for s in sections}
    return [_target_of(key, info, current.get(key), taken_names, taken_slugs) for key, info in removed.items()]


def _target_of(key: str, info: Mapping, section: Section | None, taken_names: set[str],
               taken_slugs: set[str]) -> _Target:
    """The target of one removed section (``info`` as :func:`mend_cross_references` takes it;
    ``section`` the part of it still listed, when summarized or cut)."""
    action = str(info.get("action", "dropped"))
    title = str(info.get("title") or "").strip()
    location = str(info.get("location") or "").strip()
    target = _Target(key, title, action if action in ACTIONS else "dropped", location)
    seen: set[str] = set()
    for name in [title] + _location_names(location):
        low = name.lower()
        if _usable(name) and low not in seen and low not in taken_names:
            seen.add(low)
            target.names.append(name)
    content = str(info.get("content") or "") + ("\n" + section.content if section is not None else "")
    slugs = _section_slugs(title, content)
    slugs.update(slugify(str(h)) for h in info.get("headings") or ())
    target.slugs = {s for s in slugs if s and s not in taken_slugs}
    return target


def _note_en(target: _Target) -> str:
    what = "not included" if target.dropped else "summarized"
    return f"{what}; full text in {target.location}" if target.location else what


def _note_zh(target: _Target) -> str:
    what = "未包含" if target.dropped else "已摘要"
    return f"{what}；全文见 {target.location}" if target.location else what


def _link_target(location: str) -> str:
    return f"<{location}>" if re.search(r"[\s()<>]", location) else location


def _describe(target: _Target, quoted: str) -> str:
    if target.dropped and target.location:
        return f"pointed '{quoted}' at {target.location}"
    if target.dropped:
        return f"marked '{quoted}' as not included ('{target.title}' was dropped; no location)"
    where = f" (full text in {target.location})" if target.location else ""
    return f"marked '{quoted}' as {target.action}{where}"


def mend_cross_references(
    sections: list[Section],
    removed: dict[str, dict],
    order: Sequence[str] | None = None,
) -> tuple[list[Section], list[str]]:
    """(sections with mended references, notes): see the module docstring.

    ``removed`` maps a section key to {"title", "action": dropped | summarized | cut,
    "location": source file or URL}; optional "headings" (titles of headings inside it) or
    "content" (its original text) add anchors for a dropped section. ``order`` (every
    section key in the original render order) places dropped sections for "如上所述".
    Changed sections are new objects (``Section.with_content``); nothing is mutated.
    """
    if not removed:
        return list(sections), []
    targets = _targets(sections, removed)
    by_name: dict[str, _Target] = {}
    by_slug: dict[str, _Target] = {}
    by_key = {t.key: t for t in targets}
    for t in targets:
        for name in t.names:
            by_name.setdefault(name.lower(), t)
        for slug in t.slugs:
            by_slug.setdefault(slug, t)
    en, zh = _name_patterns([name for t in targets for name in t.names])
    position = {key: i for i, key in enumerate(order)} if order else None

    out: list[Section] = []
    notes: list[str] = []
    for index, section in enumerate(sections):
        own = by_key.get(section.key)
        if own is not None and own.dropped:
            out.append(section)  # a dropped section still listed: leave it as it is
            continue
        above = _above_target(section, index, sections, by_key, position, own)
        mended, section_notes = _mended(section, _find(section.content, section.key, en, zh, by_name, by_slug, above))
        out.append(mended)
        notes.extend(section_notes)
    return out, notes


def _name_patterns(names: Sequence[str]) -> tuple[re.Pattern | None, re.Pattern | None]:
    """(English, Chinese) patterns of a reference by name ("see X", "如上文《X》"); None, None
    when no name is left to find."""
    names_alt = _name_pattern(names)
    if not names_alt:
        return None, None
    en = re.compile(
        r"(?P<lead>\(\s*)?\b(?P<verb>" + _VERBS_EN + r")\s+(?:the\s+)?"
        r"(?P<open>[" + re.escape(_OPEN) + r"]{0,2})(?P<name>" + names_alt + r")"
        r"(?P<close>[" + re.escape(_CLOSE) + r"]{0,2})(?P<noun>" + _NOUN_EN + r")?",
        re.I,
    )
    zh = re.compile(
        r"(?P<verb>" + _VERBS_ZH + r")\s*(?P<open>[《「『“\"'`]?)(?P<name>" + names_alt + r")"
        r"(?P<close>[》」』”\"'`]?)(?P<noun>" + _NOUN_ZH + r")?",
        re.I,
    )
    return en, zh


def _mended(section: Section, edits: list) -> tuple[Section, list[str]]:
    """(the section with its edits made, a note per edit); an immutable section stays as it is,
    with a note per reference it keeps."""
    if not edits:
        return section, []
    if section.tier == IMMUTABLE:
        return section, [f"{section.key}: {_UNCHANGED}; it refers to {target.action} '{target.title}' ('{quoted}')"
                         for _, _, _, quoted, target in edits]
    text = section.content
    for start, end, replacement, _, _ in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return section.with_content(text), [f"{section.key}: {_describe(target, quoted)}"
                                        for _, _, _, quoted, target in edits]


def mends_by_section(notes: Sequence[str], keys: Sequence[str]) -> dict[str, list[str]]:
    """The notes of :func:`mend_cross_references` that changed a section, by section key (of
    ``keys``, the longest key a note starts with), without the key prefix. The notes about an
    immutable section (reported, never changed) are left out."""
    out: dict[str, list[str]] = {}
    for note in notes:
        owner = max((k for k in keys if note.startswith(f"{k}: ")), key=len, default=None)
        if owner is not None and not note.startswith(f"{owner}: {_UNCHANGED}"):
            out.setdefault(owner, []).append(note[len(owner) + 2:])
    return out


def _above_target(section, index, sections, by_key, position, own) -> _Target | None:
    """The removed or summarized content that "如上所述" in ``section`` refers to, if any."""
    before: str | None = None
    if position is not None and section.key in position:
        i = position[section.key]
        keys = sorted(position, key=position.get)
        before = keys[i - 1] if i > 0 else None
    elif index > 0:
        before = sections[index - 1].key
    if before is not None and before in by_key:
        return by_key[before]
    return own  # this section itself was summarized or cut: what preceded may be gone


def _find(text, key, en, zh, by_name, by_slug, above):
    """[(start, end, replacement, quoted, target)], sorted, not overlapping: references by name,
    by anchor, and "as above" in the section ``key``, outside code spans and not already mended."""
    code = code_spans(text, strict=True)

    def keep(start: int, end: int) -> bool:
        return not _in_spans(start, code) and not _ALREADY.match(text, end)

    found = [*_name_edits(text, key, en, zh, by_name, keep), *_anchor_edits(text, key, by_slug, keep),
             *_above_edits(text, key, above, keep)]
    return _without_overlaps(found)


def _name_edits(text, key, en, zh, by_name, keep) -> list:
    """The edits of references by name ("see X", "如上文《X》"): a note after each."""
    found = []
    for pattern, lang in ((en, "en"), (zh, "zh")):
        for m in pattern.finditer(text) if pattern is not None else ():
            target = by_name.get(m.group("name").lower())
            if target is None or target.key == key or not keep(m.start(), m.end()):
                continue
            start, end = m.start("verb"), m.end()
            if lang == "zh":
                note = f"（{_note_zh(target)}）"
            elif m.group("lead") and text[end:end + 1] == ")":
                note = f" \u2014 {_note_en(target)}"  # (see X — not included; ...)
            else:
                note = f" ({_note_en(target)})"
            found.append((start, end, text[start:end] + note, text[start:end], target))
    return found


def _anchor_edits(text, key, by_slug, keep) -> list:
    """The edits of ``[text](#anchor)`` links to removed content: pointed at its location (or
    plain text) when dropped, a note after it when summarized or cut."""
    found = []
    for m in _ANCHOR.finditer(text):
        target = by_slug.get(m.group("anchor").lower())
        if target is None or target.key == key or not keep(m.start(), m.end()):
            continue
        if target.dropped:
            rep = f"[{m.group('text')}]({_link_target(target.location)})" if target.location else m.group("text")
        else:
            rep = m.group(0) + f" ({_note_en(target)})"
        found.append((m.start(), m.end(), rep, m.group(0), target))
    return found


def _above_edits(text, key, above, keep) -> list:
    """The edits of "as above" / "如上所述" when what it refers to (``above``) was removed."""
    if above is None:
        return []
    found = []
    for pattern, lang in ((_ABOVE_EN, "en"), (_ABOVE_ZH, "zh")):
        for m in pattern.finditer(text):
            if not keep(m.start(), m.end()):
                continue
            self_ref = above.key == key
            if lang == "zh":
                whose = "本节" if self_ref else f"前文“{above.title}”"
                rep = m.group(0) + f"（{whose}{_note_zh(above)}）"
            else:
                whose = "this section is" if self_ref else f"preceding section '{above.title}'"
                rep = m.group(0) + f" ({whose} {_note_en(above)})"
            found.append((m.start(), m.end(), rep, m.group(0), above))
    return found


def _without_overlaps(found: list) -> list:
    """The edits sorted by start (the longest first at one start), each overlapping an earlier
    one left out."""
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    result = []
    last_end = -1
    for item in found:
        if item[0] >= last_end:
            result.append(item)
            last_end = item[1]
    return result


@dataclass(frozen=True)
class CrossrefMending:
    """Sections with their cross-references mended, and a note per mended reference."""

    sections: tuple[Section, ...]
    notes: tuple[str, ...]

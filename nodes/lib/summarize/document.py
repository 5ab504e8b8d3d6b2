"""The markdown model of the extractive and headings summaries: units (frontmatter, headings,
sentences, table rows, code lines and the fences around them) in sections and blocks, rendered
back from a selection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fences import fences
from ..regex import lazy_regex
from .code import render_code
from ..sentences import sentence_spans
from .frontmatter import compact_frontmatter, split_frontmatter

HEADING = lazy_regex(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_RULE = lazy_regex(r"^[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_PREFIX = lazy_regex(r"^([ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+(?:\[[ xX>~/\-]\][ \t]+)?)")
_QUOTE_PREFIX = lazy_regex(r"^([ \t]*>[ \t]?)")
_INDENT = lazy_regex(r"^([ \t]*)")
_TABLE_SEP = lazy_regex(r"^[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*$")
# a line that starts a new logical line: a marker, bold, a list number, or a "Key: " label
_NEW_LINE_START = lazy_regex(
    r"^[ \t]*(?:[-*+>|<#\[!]|\*\*|__|\d{1,3}[.)][ \t]|[\w\u4e00-\u9fff .-]{1,40}[:：][ \t])"
)
_TERMINAL = tuple(".!?:;。！？；：")


@dataclass
class _Line:
    """A logical line: a paragraph line run, a list item with its continuation, a table row."""

    prefix: str
    full: str
    units: list[int]


@dataclass
class _Code:
    """A fenced block: its opening and closing fence lines (one "fence" unit, which every code
    line needs) and its body lines, each a "code" unit (None for a blank line)."""

    opening: str
    closing: str
    fence: int
    body: list[str]
    units: list[int | None]


@dataclass
class _Block:
    kind: str  # text | table | code
    lines: list[_Line]
    code: _Code | None = None


@dataclass
class _Sec:
    heading: int | None  # unit id of the heading
    level: int
    ancestors: tuple[int, ...]  # unit ids of the enclosing headings
    blocks: list[_Block]


@dataclass
class Doc:
    texts: list[str]
    kinds: list[str]  # frontmatter | heading | sentence | header | row | code
    sections: list[_Sec]
    frontmatter: int | None
    # per unit: (section index, block index, index within its block's units, position in line)
    where: list[tuple[int, int, int, int]]


def _parse_markdown(body: str) -> list[tuple[str, Any]]:
    """Flat events in order: ("heading", (level, line)), ("block", lines) and ("code", (fence
    lines, closing fence line)); fenced blocks as :func:`~ctxengine.nodes.lib.fences.fences`
    reads them (an unclosed one runs to the end and is closed by its own fence)."""
    events: list[tuple[str, Any]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            events.append(("block", list(para)))
            para.clear()

    lines = body.split("\n")
    blocks = {block.start: block for block in fences(lines, strict=True)}
    i = 0
    while i < len(lines):
        line = lines[i]
        block = blocks.get(i)
        if block is not None:
            flush()
            events.append(("code", (lines[block.start:block.end + 1] if block.closed
                                    else lines[block.start:block.end + 1] + [block.closing], block.closing)))
            i = block.end + 1
            continue
        i += 1
        m = HEADING.match(line)
        if m:
            flush()
            events.append(("heading", (len(m.group(1)), line.rstrip())))
            continue
        if not line.strip() or _RULE.match(line):
            flush()
            continue
        para.append(line)
    flush()
    return events


def _logical_lines(lines: list[str]) -> list[tuple[str, str]]:
    """Group the lines of a text block into (prefix, body) logical lines."""
    groups: list[list[str]] = []
    in_item = False
    for line in lines:
        if groups and _continues(line, groups[-1][-1], in_item):
            groups[-1].append(line)
            continue
        groups.append([line])
        in_item = bool(_LIST_PREFIX.match(line))
    return [(_line_prefix(full), full) for full in ("\n".join(group) for group in groups)]


def _continues(line: str, prev: str, in_item: bool) -> bool:
    """Whether ``line`` continues the logical line ending with ``prev``: it starts nothing new (no
    marker, number or label) and is indented inside a list item, starts lower case (a
    hard-wrapped sentence), or follows a long line without a terminal mark."""
    if _LIST_PREFIX.match(line) or _NEW_LINE_START.match(line):
        return False
    first = line.lstrip()[:1]
    if in_item and line[:1] in " \t":
        return True  # an indented line inside a list item
    if first.islower():
        return True  # a hard-wrapped sentence
    return len(prev) >= 60 and not prev.rstrip().endswith(_TERMINAL) and first.isalpha()


def _line_prefix(full: str) -> str:
    """A logical line's prefix: its list marker, quote marker, or indent."""
    m = _LIST_PREFIX.match(full) or _QUOTE_PREFIX.match(full) or _INDENT.match(full)
    return m.group(1) if m else ""


def build(text: str) -> Doc:
    """The document model of ``text``: its units (compact frontmatter, headings, sentences,
    table rows, code blocks) in sections of blocks of logical lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw_fm, body = split_frontmatter(text)
    doc = Doc([], [], [_Sec(None, 0, (), [])], None, [])
    if raw_fm is not None:
        doc.frontmatter = _unit(doc, compact_frontmatter(raw_fm), "frontmatter", (-1, -1, 0, 0))
    stack: list[tuple[int, int]] = []  # (level, heading uid)
    for kind, payload in _parse_markdown(body):
        si = len(doc.sections) - 1
        if kind == "heading":
            _add_heading(doc, stack, *payload)
            continue
        bi = len(doc.sections[si].blocks)
        if kind == "code":
            block = _code_block(doc, *payload, si, bi)
        elif len(payload) >= 2 and all(ln.lstrip().startswith("|") for ln in payload):
            block = _table_block(doc, payload, si, bi)
        else:
            block = _text_block(doc, payload, si, bi)
        if block.lines or block.code is not None:
            doc.sections[si].blocks.append(block)
    return doc


def _unit(doc: Doc, text: str, kind: str, loc: tuple[int, int, int, int]) -> int:
    doc.texts.append(text)
    doc.kinds.append(kind)
    doc.where.append(loc)
    return len(doc.texts) - 1


def _add_heading(doc: Doc, stack: list[tuple[int, int]], level: int, line: str) -> None:
    """A heading opens a section under the open headings of lower levels (its ancestors)."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    uid = _unit(doc, line, "heading", (len(doc.sections), -1, 0, 0))
    doc.sections.append(_Sec(uid, level, tuple(u for _, u in stack), []))
    stack.append((level, uid))


def _table_block(doc: Doc, rows: list[str], si: int, bi: int) -> _Block:
    """A table: its header (with the separator row) as one unit, each other row as one."""
    block = _Block("table", [])
    k = 0
    if _TABLE_SEP.match(rows[1]):
        head = "\n".join(rows[:2])
        block.lines.append(_Line("", head, [_unit(doc, head, "header", (si, bi, 0, 0))]))
        rows, k = rows[2:], 1
    for row in rows:
        block.lines.append(_Line("", row, [_unit(doc, row, "row", (si, bi, k, 0))]))
        k += 1
    return block


def _code_block(doc: Doc, lines: list[str], closing: str, si: int, bi: int) -> _Block:
    """A fenced block: one "fence" unit (opening and closing lines) and a "code" unit per
    non-blank body line; position: the line's place in the body."""
    opening, body = lines[0], lines[1:-1]
    fence = _unit(doc, opening + "\n" + closing, "fence", (si, bi, 0, 0))
    units = [None if not line.strip() else _unit(doc, line, "code", (si, bi, k + 1, 0))
             for k, line in enumerate(body)]
    return _Block("code", [], _Code(opening, closing, fence, body, units))


def _text_block(doc: Doc, lines: list[str], si: int, bi: int) -> _Block:
    """A paragraph or list: each logical line's sentences as units."""
    block = _Block("text", [])
    k = 0
    for prefix, full in _logical_lines(lines):
        rest = full[len(prefix):]
        ids = []
        for j, (a, b) in enumerate(sentence_spans(rest)):
            ids.append(_unit(doc, rest[a:b], "sentence", (si, bi, k, j)))
            k += 1
        if ids:
            block.lines.append(_Line(prefix, full, ids))
    return block


def render_doc(doc: Doc, selected: set[int]) -> str:
    """The ``selected`` units in document order: the frontmatter, each selected heading, each
    block with something selected, blank lines between."""
    parts: list[str] = []
    if doc.frontmatter is not None and doc.frontmatter in selected:
        parts.append(doc.texts[doc.frontmatter])
    for sec in doc.sections:
        if sec.heading is not None and sec.heading in selected:
            parts.append(doc.texts[sec.heading])
        parts.extend(text for text in (_block_text(doc, block, selected) for block in sec.blocks) if text is not None)
    return "\n\n".join(parts)


def _block_text(doc: Doc, block: _Block, selected: set[int]) -> str | None:
    """A block with its selected units (a code block with its selected lines, when its fence is
    selected), None when nothing of it is."""
    code = block.code
    if code is not None:
        if code.fence not in selected:
            return None
        return render_code(code.opening, code.closing, code.body, [u is not None and u in selected for u in code.units])
    out = [text for text in (_line_text(doc, line, selected) for line in block.lines) if text is not None]
    return "\n".join(out) if out else None


def _line_text(doc: Doc, line: _Line, selected: set[int]) -> str | None:
    """A logical line as written when all its units are selected, its prefix and the selected
    units when some are, None when none is."""
    chosen = [u for u in line.units if u in selected]
    if not chosen:
        return None
    if len(chosen) == len(line.units):
        return line.full
    return line.prefix + " ".join(doc.texts[u] for u in chosen)

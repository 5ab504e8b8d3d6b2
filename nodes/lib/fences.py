"""The one reader of fenced code blocks for every stage (headings, @ lines, task lines, plan and
document summaries, cuts): which lines are code, where each block opens and where it ends.

The rules are CommonMark's, with two additions for what LLM-written files do:

* An opening fence is three or more backticks or tildes; a backtick fence's info string holds
  no backtick (so ```` ```x``` ```` on one line is inline code, not a fence). ``strict``
  readers take fences indented by at most three spaces (a line indented by four is indented
  code); the others take any indentation (code under a list item, inside a GSD ``<task>``).
  A block is closed by a line of the same character, at least as long, with nothing after it.
* Nested examples: inside a block, a fence line of the same character, at least as long, *with*
  an info string (```` ```bash```` inside ```` ```markdown````) opens a nested example whose
  bare fence closes it, not the outer block, when this nesting balances; when it does not, the
  first bare fence closes the block (CommonMark).
* Elements (``elements=True``, GSD plans): a block opened inside an element that is open on
  its own lines (``<action>`` ... ``</action>``) ends at that element's closing tag when it is
  not closed before it; the tag line is not code. Elsewhere an unclosed block runs to the end.

Only fence-like lines (and, with ``elements``, tag lines) are looked at after one pass, so the
reader is linear in the text plus the number of fence lines squared at worst.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .regex import lazy_regex


#: A fence line at any indentation: (indent, run of ``` or ~~~, rest of the line).
_FENCE_LINE = lazy_regex(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_OPEN_ELEMENT = lazy_regex(r"^[ \t]*<([A-Za-z_][\w-]*)(?:[ \t][^<>]*)?>[ \t]*$")
_CLOSE_ELEMENT = lazy_regex(r"^[ \t]*</([A-Za-z_][\w-]*)>[ \t]*$")


@dataclass(frozen=True)
class Fence:
    """One fenced code block: ``start`` is the opening line's index, ``end`` the index of its
    last line (the closing fence when ``closed``), ``mark`` the fence run (```` ``` ````,
    ``~~~~``), ``info`` the info string, ``indent`` the opening line's indentation."""

    start: int
    end: int
    closed: bool
    mark: str
    info: str
    indent: str

    @property
    def closing(self) -> str:
        """The line that closes this block (its opening indentation and fence run)."""
        return self.indent + self.mark


def _columns(indent: str) -> int:
    return sum(4 - (i % 4) if ch == "\t" else 1 for i, ch in enumerate(indent))


def fence_line(line: str, strict: bool = False) -> tuple[str, str, str] | None:
    """(indent, fence run, info string) when ``line`` could open or close a fenced block, else
    None (``strict``: indented by at most three columns)."""
    match = _FENCE_LINE.match(line)
    if match is None:
        return None
    indent, run, rest = match.groups()
    if strict and _columns(indent) > 3:
        return None
    if run[0] == "`" and "`" in rest:
        return None
    return indent, run, rest.strip()


def _closes(found: tuple[str, str, str], run: str) -> bool:
    return found[1][0] == run[0] and len(found[1]) >= len(run) and not found[2]


def _nests(found: tuple[str, str, str], run: str) -> bool:
    return found[1][0] == run[0] and len(found[1]) >= len(run) and bool(found[2])


def fences(lines: Sequence[str], strict: bool = False, elements: bool = False) -> list[Fence]:
    """Every fenced code block of ``lines`` in order (see the module docstring)."""
    marks: dict[int, tuple[str, str, str]] = {}
    tags: dict[int, tuple[str, str]] = {}  # line -> ("open" | "close", element name)
    for i, line in enumerate(lines):
        found = fence_line(line, strict)
        if found is not None:
            marks[i] = found
        elif elements:
            match = _OPEN_ELEMENT.match(line)
            if match:
                tags[i] = ("open", match.group(1).lower())
            else:
                match = _CLOSE_ELEMENT.match(line)
                if match:
                    tags[i] = ("close", match.group(1).lower())
    points = sorted(set(marks) | set(tags))
    out: list[Fence] = []
    open_elements: list[str] = []
    k = 0
    while k < len(points):
        i = points[k]
        if i in tags:
            _track(open_elements, *tags[i])
            k += 1
            continue
        found = marks[i]
        limit = _element_end(points, k, tags, open_elements, len(lines)) if open_elements else len(lines)
        end = _block_end(points, k, marks, limit)
        closed = end is not None
        end = end if end is not None else limit - 1
        out.append(Fence(i, end, closed, found[1], found[2], found[0]))
        while k < len(points) and points[k] <= end:
            k += 1
    return out


def _track(open_elements: list[str], kind: str, name: str) -> None:
    """The open elements after a tag line outside code: an open tag pushes, a close tag pops
    back to its element (a close tag of no open element changes nothing)."""
    if kind == "open":
        open_elements.append(name)
    elif name in open_elements:
        del open_elements[len(open_elements) - 1 - open_elements[::-1].index(name):]


def _element_end(points: list[int], k: int, tags: dict, open_elements: list[str], count: int) -> int:
    """The index of the first line after ``points[k]`` that closes an open element (the
    innermost one or any enclosing it), or one past the last line."""
    names = set(open_elements)
    for i in points[k + 1:]:
        if i in tags and tags[i][0] == "close" and tags[i][1] in names:
            return i
    return count


def _block_end(points: list[int], k: int, marks: dict, limit: int) -> int | None:
    """The closing line of the block opened at ``points[k]`` before ``limit``: the bare fence
    that balances its nested examples when they balance, else the first bare fence; None when
    it is not closed before ``limit``."""
    run = marks[points[k]][1]
    first_close = None
    depth = 1
    for i in points[k + 1:]:
        if i >= limit:
            break
        found = marks.get(i)
        if found is None:
            continue
        if _closes(found, run):
            first_close = i if first_close is None else first_close
            depth -= 1
            if depth == 0:
                return i
        elif _nests(found, run):
            depth += 1
    return first_close


def fenced(lines: Sequence[str], strict: bool = False, elements: bool = False) -> list[bool]:
    """Per line of ``lines``: whether it belongs to a fenced code block (fence lines included)."""
    inside = [False] * len(lines)
    for block in fences(lines, strict, elements):
        for i in range(block.start, block.end + 1):
            inside[i] = True
    return inside


def open_block(lines: Sequence[str], strict: bool = False) -> Fence | None:
    """The fenced block that ``lines`` end inside (opened and not closed), or None."""
    blocks = fences(lines, strict)
    return blocks[-1] if blocks and not blocks[-1].closed else None


def code_spans(text: str, strict: bool = False) -> list[tuple[int, int]]:
    """(start, end) character offsets in ``text`` of each fenced code block, fence lines
    included (an unclosed block runs to the end of the text)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    return [(starts[b.start], min(len(text), starts[b.end + 1] - 1)) for b in fences(lines, strict)]


def without_code(text: str, strict: bool = False, filler: str = " ") -> str:
    """``text`` with each fenced code block replaced by ``filler``."""
    out, last = [], 0
    for a, b in code_spans(text, strict):
        out.append(text[last:a])
        out.append(filler)
        last = b
    out.append(text[last:])
    return "".join(out)

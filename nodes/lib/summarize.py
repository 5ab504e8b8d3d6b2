"""Summaries without a model: extractive, headings outline, plan, diff, head and tail.

Every function here is pure and deterministic (same input, same output) and returns text
that fits ``max_tokens`` by the exact count of the given :class:`TokenCounter`.

How a summary is fitted: the text is cut into units (the compact frontmatter, each heading,
each sentence of each paragraph or list item, each table row, each short code block), the
units are put in priority order, and a greedy pass takes units in that order while their
*estimated* cost (``counter.estimate``, corrected for multi-byte scripts) fits an estimated
budget. The chosen units are rendered in document order and counted exactly once; when the
count is over (or far under) the limit the estimated budget is rescaled by the observed ratio
and the pass repeats (a handful of times at most). Only the output is ever counted exactly,
so a 500 KB document costs one parse plus a few counts of a budget-sized string.

Priority orders:

* extractive: frontmatter (compact), headings (shallow levels first), the sentences of
  first paragraphs that carry fact-like ids (tickets, versions, hashes), the first sentence
  of the first paragraph under each heading, other sentences carrying such ids by score, the rest of those first paragraphs (round-robin over the
  headings), then key sentences by score. When the whole outline does not fit, the top-level
  headings come first and then the sentences by score (first sentences ranked up by
  position), deeper headings only as the sentences under them need them: when the outline
  would take more than half of the budget. The score mixes position, term weight
  (tf-idf over the document's sentences), identifiers (CamelCase, snake_case, ``code``),
  paths (a/b.py, foo.md) and numbers. When even the top-level headings do not fit, the
  summary is the first lines of the document.
* headings: frontmatter, headings, the first sentence under each heading.
* plan (article plan.md, the GSD plan section, a GSD PLAN.md), whole lines only: the task
  count line and in-progress task lines, every task's skeleton (<name>, <files>, <verify>,
  <done>; Files/Verify/Done lines), pending task lines, action prose, other prose, pending
  detail, done task lines; @ lines, code blocks and <context> blocks last. Task boxes are read
  by nodes/lib/plan.py (one parser for the plan stage and this summary).
* diff: a total line and one ``<status> <path> +n/-m`` line per file.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from .quote import quoted
from ..types import ConfigError, Section
from . import plan as _plan
from .sentences import sentence_spans
from .tokens import TokenCounter

__all__ = [
    "METHODS",
    "Summarizer",
    "as_summarizer",
    "summarize_section",
    "summarize_text",
    "extractive_summary",
    "headings_summary",
    "plan_summary",
    "diff_summary",
    "diff_file_stats",
    "head_summary",
    "tail_summary",
    "fit_tokens",
    "compact_frontmatter",
    "sentence_scores",
]

#: The summarizer variants (config key truncation.summarizer).
METHODS = ("extractive", "headings")


# ============================================================================ entry points


@dataclass(frozen=True)
class Summarizer:
    """A deterministic summarizer without a model; ``method`` is one of :data:`METHODS`.

    ``summarize`` dispatches on the section kind first (plan, git, history, tree,
    environment have their own summaries) and uses ``method`` for everything else.
    """

    method: str = "extractive"

    def summarize(self, section: Section, max_tokens: int, counter: TokenCounter) -> str:
        """The section's content shortened to at most ``max_tokens`` (exact count)."""
        return summarize_section(section, max_tokens, counter, self.method)


def as_summarizer(value: "Summarizer | str | None") -> Summarizer:
    """A :class:`Summarizer` from a summarizer or a method name (None -> extractive); an unknown
    name raises ConfigError naming the config key ``truncation.summarizer``."""
    if isinstance(value, Summarizer):
        return value
    name = value or "extractive"
    if name not in METHODS:
        raise ConfigError(
            f"truncation.summarizer: unknown summarizer {quoted(name)}; set it to one of: {', '.join(METHODS)}"
        )
    return Summarizer(name)


def summarize_section(section: Section, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """Summary of ``section.content`` in at most ``max_tokens`` tokens, chosen by ``section.kind``:
    plan -> :func:`plan_summary` (the ``method`` summary for a GSD plan view, data layout
    "gsd"), git -> :func:`diff_summary` (``section.data["files"]`` / ``["renames"]`` when
    present), history -> :func:`tail_summary`, tree / environment -> :func:`head_summary`,
    anything else -> ``method`` (extractive | headings)."""
    text = section.content
    kind = section.kind
    data = section.data or {}
    if kind == "plan":  # either layout: the task boxes and <task> blocks come first
        return plan_summary(text, max_tokens, counter, method=method)
    if kind == "git":
        return diff_summary(text, max_tokens, counter, files=data.get("files"), renames=data.get("renames"))
    if kind == "history":
        return tail_summary(text, max_tokens, counter)
    if kind in ("tree", "environment"):
        return head_summary(text, max_tokens, counter)
    return summarize_text(text, max_tokens, counter, method)


def summarize_text(text: str, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """Markdown summary of ``text`` by ``method`` (extractive | headings)."""
    if method == "headings":
        return headings_summary(text, max_tokens, counter)
    if method == "extractive":
        return extractive_summary(text, max_tokens, counter)
    raise ValueError(f"unknown summarizer {quoted(method)}; use one of: {', '.join(METHODS)}")


def extractive_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Frontmatter, headings, first paragraph per heading, then key sentences, within
    ``max_tokens``; degrades to headings + first sentences, headings only, the first lines."""
    return _markdown_summary(text, max_tokens, counter, key_sentences=True)


def headings_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Frontmatter, the headings outline and the first sentence under each heading, within
    ``max_tokens``. Text without any heading gets the extractive summary instead."""
    return _markdown_summary(text, max_tokens, counter, key_sentences=False)


# ============================================================================ whole lines

_ANY_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")  # a fence at any indentation (code under a list item)
_WHOLE_LINE = re.compile(r"^[ \t]*(?:@\S|\|)")  # an @ reference line, a markdown table row


def open_fence(text: str) -> str | None:
    """The opening line of the fenced code block that ``text`` ends inside, or None."""
    opened = None
    mark = ""
    for line in text.split("\n"):
        m = _ANY_FENCE.match(line)
        if not m:
            continue
        if opened is None:
            opened, mark = line, m.group(1)
        elif m.group(1)[0] == mark[0] and len(m.group(1)) >= len(mark) and not line.strip()[len(m.group(1)):].strip():
            opened = None
    return opened


def closing_fence(opening: str) -> str:
    """The line that closes the fenced block ``opening`` opens (same indentation and fence)."""
    return opening[: len(opening) - len(opening.lstrip())] + _ANY_FENCE.match(opening).group(1)


def whole_line_only(line: str, in_fence: bool = False) -> bool:
    """Whether ``line`` may only be kept whole or not at all: a line of a fenced code block
    (``in_fence``) or a fence, an ``@`` reference line, a markdown table row."""
    return in_fence or bool(_ANY_FENCE.match(line)) or bool(_WHOLE_LINE.match(line))


def prose_cut(line: str, limit: int) -> int:
    """Where to cut the prose ``line`` at or before ``limit`` characters: after the last
    sentence that ends there, else after the last whole word; 0 when there is neither."""
    ends = [b for _, b in sentence_spans(line) if b <= limit and b < len(line.rstrip())]
    if ends:
        return ends[-1]
    space = line.rfind(" ", 0, limit + 1)
    return space if space > 0 else 0


def safe_prefix(text: str, end: int) -> str:
    """``text[:end]`` cut back so that it never ends inside a line it may only keep whole
    (code, ``@`` line, table row: back to the line start) nor inside a prose sentence when
    one ends earlier on the line (see :func:`prose_cut`); a fenced block left open is closed."""
    if end < len(text) and text[end:end + 1] != "\n":
        start = text.rfind("\n", 0, end) + 1
        line_end = text.find("\n", start)
        line = text[start: len(text) if line_end < 0 else line_end]
        if whole_line_only(line, open_fence(text[:start]) is not None):
            end = start
        else:
            end = start + prose_cut(line, end - start)
    prefix = text[:end].rstrip()
    fence = open_fence(prefix)
    return prefix + "\n" + closing_fence(fence) if fence is not None else prefix


def safe_suffix(text: str, start: int) -> str:
    """``text[start:]`` moved on to the next line start when ``start`` is inside a line; a
    fenced block it starts inside gets its opening line back."""
    if 0 < start < len(text) and text[start - 1] != "\n":
        newline = text.find("\n", start)
        start = len(text) if newline < 0 else newline + 1
    suffix = text[start:].lstrip("\n")
    fence = open_fence(text[:start])
    return fence + "\n" + suffix if fence is not None and suffix else suffix


# ============================================================================ estimates and fitting


def _est(text: str, counter: TokenCounter) -> int:
    """Estimated tokens: ``counter.estimate`` (chars / 4), plus about 3/4 of a token for each
    multi-byte character (a CJK character is 3 UTF-8 bytes and roughly one token)."""
    n = counter.estimate(text)
    if not text.isascii():
        n += ((len(text.encode("utf-8")) - len(text)) * 3) // 8
    return n


def _fits_quickly(text: str, max_tokens: int, counter: TokenCounter) -> bool:
    """Whether ``text`` fits as it is; counts exactly only when the estimate is near the limit."""
    if len(text.encode("utf-8")) <= max_tokens:  # every token covers at least one byte
        return True
    if _est(text, counter) > max_tokens * 1.5:
        return False
    return counter.count(text) <= max_tokens


def fit_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` unchanged when it fits, else its longest token prefix that fits, cut back to
    a line end (a sentence or word end in prose; never inside a code line, an ``@`` line or a
    table row, and a fenced block is closed: :func:`safe_prefix`), never more than
    ``max_tokens`` by exact count."""
    if max_tokens <= 0 or not text:
        return ""
    if _fits_quickly(text, max_tokens, counter):
        return text
    # a token rarely spans more than a dozen characters: no need to encode all of a huge text
    tokens = counter.encode(text[: max_tokens * 12 + 64])[:max_tokens]
    while tokens:
        cut = safe_prefix(text, len(counter.decode(tokens).rstrip("\ufffd")))
        if cut and counter.count(cut) <= max_tokens:
            return cut
        tokens = tokens[: max(0, len(tokens) - max(1, len(tokens) // 50))]
    return ""


@dataclass
class _Problem:
    """A selection problem: units with estimated costs, dependencies, a priority order and a
    renderer from a set of unit ids to text."""

    costs: list[int]
    requires: list[tuple[int, ...]]
    order: list[int]
    render: Callable[[set[int]], str]
    prefix: bool = False  # stop at the first unit that does not fit (head / tail of lines)
    blocking: frozenset = frozenset()  # units that stop the pass when they do not fit


def _greedy(problem: _Problem, budget: float) -> set[int]:
    costs, requires = problem.costs, problem.requires
    selected: set[int] = set()
    used = 0
    cheapest = min((costs[u] for u in problem.order), default=0)
    for uid in problem.order:
        if uid in selected:
            continue
        cost = costs[uid]
        need = [r for r in requires[uid] if r not in selected]
        for r in need:
            cost += costs[r]
        if used + cost <= budget:
            selected.add(uid)
            selected.update(need)
            used += cost
            if budget - used < cheapest:
                break
        elif problem.prefix or uid in problem.blocking:
            break
    return selected


def _solve(problem: _Problem, max_tokens: int, counter: TokenCounter) -> tuple[str, set[int]] | None:
    """The fullest rendering whose exact count fits ``max_tokens``, or None when no non-empty
    selection fits. The estimated budget is rescaled by the exact/estimated ratio of each
    attempt; at most 8 exact counts of budget-sized strings."""
    universe: set[int] = set()
    for uid in problem.order:
        universe.add(uid)
        universe.update(problem.requires[uid])
    budget = float(max_tokens)
    lo: float | None = None  # largest estimated budget known to fit
    hi: float | None = None  # smallest estimated budget known to overflow
    best: tuple[str, set[int], int] | None = None
    seen: dict[frozenset, int] = {}
    for _ in range(8):
        selected = _greedy(problem, budget)
        key = frozenset(selected)
        if key in seen:
            n = seen[key]
            text = None
        else:
            if not selected:
                n, text = 0, ""
            else:
                text = problem.render(selected)
                n = counter.count(text)
            seen[key] = n
        if n <= max_tokens:
            if text is not None and selected and (best is None or n > best[2]):
                best = (text, selected, n)
            lo = budget if lo is None else max(lo, budget)
            if len(selected) == len(universe) or n >= 0.95 * max_tokens:
                break
            new = budget * max_tokens / max(n, 1) if n else budget * 2
        else:
            hi = budget if hi is None else min(hi, budget)
            new = budget * (max_tokens / n) * 0.97
        if lo is not None and hi is not None:
            if hi - lo <= max(1.0, lo * 0.01):
                break
            if not lo < new < hi:
                new = (lo + hi) / 2
        budget = new
    if best is None:
        return None
    return best[0], best[1]


# ============================================================================ frontmatter

_FRONTMATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)


def _split_frontmatter(text: str) -> tuple[str | None, str]:
    """(raw YAML or None, body); never raises (bad YAML is kept as raw lines)."""
    match = _FRONTMATTER.match(text)
    if not match:
        return None, text
    return match.group(1), text[match.end():]


def _compact_value(value: Any, depth: int, tight: bool) -> Any:
    max_str, max_items, max_depth = (60, 3, 1) if tight else (160, 8, 2)
    if isinstance(value, str):
        value = " ".join(value.split())
        return value if len(value) <= max_str else value[: max_str - 1].rstrip() + "…"
    if isinstance(value, Mapping):
        if depth >= max_depth:
            return f"… ({len(value)} keys)"
        items = list(value.items())
        out = {k: _compact_value(v, depth + 1, tight) for k, v in items[:max_items]}
        if len(items) > max_items:
            out["…"] = f"{len(items) - max_items} more"
        return out
    if isinstance(value, (list, tuple)):
        if depth >= max_depth:
            return f"… ({len(value)} items)"
        out = [_compact_value(v, depth + 1, tight) for v in value[:max_items]]
        if len(value) > max_items:
            out.append(f"… {len(value) - max_items} more")
        return out
    return value


def _flow(value: Any) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True, sort_keys=False)
    dumped = dumped.strip()
    if dumped.endswith("\n..."):
        dumped = dumped[:-4].rstrip()
    elif dumped.endswith("..."):
        dumped = dumped[:-3].rstrip()
    return dumped


def compact_frontmatter(raw: str, tight: bool = False) -> str:
    """The YAML frontmatter ``raw`` (without its ``---`` lines) as a compact block: one
    ``key: value`` line per top-level key, nested values in flow style, long strings and
    lists shortened (``tight`` shortens harder). Still valid YAML when the input was;
    unparseable YAML keeps its non-blank, non-comment lines (shortened)."""
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        data = None
    lines: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            try:
                lines.append(f"{_flow(key)}: {_flow(_compact_value(value, 0, tight))}")
            except yaml.YAMLError:  # an unrepresentable value: keep its repr
                lines.append(f"{key}: {str(value)[:60]}")
    else:
        limit = 60 if tight else 160
        for line in raw.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line if len(line) <= limit else line[: limit - 1] + "…")
    return "---\n" + "\n".join(lines) + "\n---"


# ============================================================================ markdown model

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_PREFIX = re.compile(r"^([ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+(?:\[[ xX>~/\-]\][ \t]+)?)")
_QUOTE_PREFIX = re.compile(r"^([ \t]*>[ \t]?)")
_INDENT = re.compile(r"^([ \t]*)")
_TABLE_SEP = re.compile(r"^[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*$")
# a line that starts a new logical line: a marker, bold, a list number, or a "Key: " label
_NEW_LINE_START = re.compile(
    r"^[ \t]*(?:[-*+>|<#\[!]|\*\*|__|\d{1,3}[.)][ \t]|[\w\u4e00-\u9fff .-]{1,40}[:：][ \t])"
)
_TERMINAL = tuple(".!?:;。！？；：")

_CODE_MAX_LINES = 20  # longer code blocks are never chosen as key units


@dataclass
class _Line:
    """A logical line: a paragraph line run, a list item with its continuation, a table row."""

    prefix: str
    full: str
    units: list[int]


@dataclass
class _Block:
    kind: str  # text | table | code
    lines: list[_Line]


@dataclass
class _Sec:
    heading: int | None  # unit id of the heading
    level: int
    ancestors: tuple[int, ...]  # unit ids of the enclosing headings
    blocks: list[_Block]


@dataclass
class _Doc:
    texts: list[str]
    kinds: list[str]  # frontmatter | heading | sentence | header | row | code
    sections: list[_Sec]
    frontmatter: int | None
    # per unit: (section index, block index, index within its block's units, position in line)
    where: list[tuple[int, int, int, int]]


def _parse_markdown(body: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, list[str]]]]:
    """Flat events: headings (level, line) and blocks (kind, lines) in order; see _build."""
    events: list[tuple[str, Any]] = []
    para: list[str] = []
    fence: list[str] | None = None
    fence_mark = ""
    depth = 0

    def flush() -> None:
        if para:
            events.append(("block", list(para)))
            para.clear()

    for line in body.split("\n"):
        if fence is not None:
            fence.append(line)
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence_mark[0]:
                rest = line.strip()[len(m.group(1)):].strip()
                if rest and len(m.group(1)) == len(fence_mark):
                    depth += 1  # "```bash" inside "```markdown": a nested example (LLM-written docs)
                elif not rest and len(m.group(1)) >= len(fence_mark):
                    depth -= 1
                    if depth == 0:
                        events.append(("code", fence))
                        fence = None
            continue
        m = _FENCE.match(line)
        if m:
            flush()
            fence, fence_mark, depth = [line], m.group(1), 1
            continue
        m = _HEADING.match(line)
        if m:
            flush()
            events.append(("heading", (len(m.group(1)), line.rstrip())))
            continue
        if not line.strip() or _RULE.match(line):
            flush()
            continue
        para.append(line)
    flush()
    if fence is not None:  # an unclosed fence runs to the end
        events.append(("code", fence))
    return events  # type: ignore[return-value]


def _logical_lines(lines: list[str]) -> list[tuple[str, str]]:
    """Group the lines of a text block into (prefix, body) logical lines."""
    groups: list[list[str]] = []
    in_item = False
    for line in lines:
        if groups:
            prev = groups[-1][-1]
            start = _LIST_PREFIX.match(line) or _NEW_LINE_START.match(line)
            continuation = False
            if not start:
                stripped = line.lstrip()
                first = stripped[:1]
                if in_item and line[:1] in " \t":
                    continuation = True  # an indented line inside a list item
                elif first.islower():
                    continuation = True  # a hard-wrapped sentence
                elif len(prev) >= 60 and not prev.rstrip().endswith(_TERMINAL) and first.isalpha():
                    continuation = True
            if continuation:
                groups[-1].append(line)
                continue
        groups.append([line])
        in_item = bool(_LIST_PREFIX.match(line))
    out = []
    for group in groups:
        full = "\n".join(group)
        m = _LIST_PREFIX.match(full) or _QUOTE_PREFIX.match(full) or _INDENT.match(full)
        prefix = m.group(1) if m else ""
        out.append((prefix, full))
    return out


def _build(text: str) -> _Doc:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw_fm, body = _split_frontmatter(text)
    texts: list[str] = []
    kinds: list[str] = []
    where: list[tuple[int, int, int, int]] = []

    def unit(t: str, kind: str, loc: tuple[int, int, int, int]) -> int:
        texts.append(t)
        kinds.append(kind)
        where.append(loc)
        return len(texts) - 1

    frontmatter = unit(compact_frontmatter(raw_fm), "frontmatter", (-1, -1, 0, 0)) if raw_fm is not None else None
    sections = [_Sec(None, 0, (), [])]
    stack: list[tuple[int, int]] = []  # (level, heading uid)
    for kind, payload in _parse_markdown(body):
        si = len(sections) - 1
        sec = sections[si]
        if kind == "heading":
            level, line = payload
            while stack and stack[-1][0] >= level:
                stack.pop()
            ancestors = tuple(uid for _, uid in stack)
            uid = unit(line, "heading", (len(sections), -1, 0, 0))
            sections.append(_Sec(uid, level, ancestors, []))
            stack.append((level, uid))
            continue
        bi = len(sec.blocks)
        if kind == "code":
            full = "\n".join(payload)
            uid = unit(full, "code", (si, bi, 0, 0))
            sec.blocks.append(_Block("code", [_Line("", full, [uid])]))
            continue
        lines: list[str] = payload
        if len(lines) >= 2 and all(ln.lstrip().startswith("|") for ln in lines):
            block = _Block("table", [])
            rows = lines
            k = 0
            if _TABLE_SEP.match(rows[1]):
                head = "\n".join(rows[:2])
                block.lines.append(_Line("", head, [unit(head, "header", (si, bi, 0, 0))]))
                rows = rows[2:]
                k = 1
            for row in rows:
                block.lines.append(_Line("", row, [unit(row, "row", (si, bi, k, 0))]))
                k += 1
            sec.blocks.append(block)
            continue
        block = _Block("text", [])
        k = 0
        for prefix, full in _logical_lines(lines):
            rest = full[len(prefix):]
            ids = []
            for j, (a, b) in enumerate(sentence_spans(rest)):
                ids.append(unit(rest[a:b], "sentence", (si, bi, k, j)))
                k += 1
            if ids:
                block.lines.append(_Line(prefix, full, ids))
        if block.lines:
            sec.blocks.append(block)
    return _Doc(texts, kinds, sections, frontmatter, where)


def _render_doc(doc: _Doc, selected: set[int]) -> str:
    parts: list[str] = []
    if doc.frontmatter is not None and doc.frontmatter in selected:
        parts.append(doc.texts[doc.frontmatter])
    for sec in doc.sections:
        if sec.heading is not None and sec.heading in selected:
            parts.append(doc.texts[sec.heading])
        for block in sec.blocks:
            out = []
            for line in block.lines:
                chosen = [u for u in line.units if u in selected]
                if not chosen:
                    continue
                if len(chosen) == len(line.units):
                    out.append(line.full)
                else:
                    out.append(line.prefix + " ".join(doc.texts[u] for u in chosen))
            if out:
                parts.append("\n".join(out))
    return "\n\n".join(parts)


# ============================================================================ scoring

_STOPWORDS = frozenset(
    """
    the and for are but not you all any can had her was one our out has have been were
    this that with from they will would there their what which when who how its into
    than then them these those also just more most some such very each other only over
    should could about after before being both does doing during here itself may might
    must same shall upon while where your yours we us our ours is it be as at by on or
    of to in an a if so do no use used using get got make made like well still even
    """.split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}|[\u3400-\u4dbf\u4e00-\u9fff]{2,}")
# identifiers: CamelCase / camelCase, snake_case, `code`
_IDENT = re.compile(
    r"`[^`\n]+`"
    r"|\b(?:[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*)\b"
    r"|\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b"
)
# paths (a/b.py, src/lib/) and file names with a known extension
_PATH = re.compile(
    r"(?:[\w.~-]+/)+[\w.-]+"
    r"|\b[\w-]+\.(?:py|md|ts|tsx|js|jsx|json|ya?ml|toml|ini|cfg|txt|sh|rs|go|java|kt|swift|c|h|cpp|hpp"
    r"|rb|php|sql|html|css|lock|log)\b"
)
_NUMBER = re.compile(r"\d")
# fact-like tokens: ids that name one thing (ticket and incident ids, versions, hashes, uuids):
# letters and digits joined by hyphens with at least one digit, or a hex run with letters and digits
_FACTLIKE = re.compile(
    r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b"
)


def fact_tokens(sentence: str) -> int:
    """How many fact-like tokens (ids with digits: tickets, versions, hashes) ``sentence`` holds."""
    return len(_FACTLIKE.findall(sentence))


def fact_ids(text: str) -> list[str]:
    """The fact-like tokens of ``text`` in order (see :func:`fact_tokens`)."""
    return _FACTLIKE.findall(text)


def _terms(text: str) -> list[str]:
    out = []
    for word in _WORD.findall(text):
        if word.isascii():
            low = word.lower()
            if low not in _STOPWORDS:
                out.append(low)
        else:  # a CJK run: its character bigrams
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
    return out


def sentence_scores(sentences: Sequence[str], positions: Sequence[float] | None = None) -> list[float]:
    """A key-sentence score for each of ``sentences`` (higher is more worth keeping).

    term weight: sum over the sentence's distinct terms of log(1 + tf) * idf, where tf counts
    the term in all sentences and idf = log(N / df) treats each sentence as a document,
    divided by sqrt(terms) and scaled to [0, 1]; plus position (``positions``: 1.0 for the
    most prominent place down to 0.0), identifiers (CamelCase, snake_case, `code`), paths and
    numbers, and most for fact-like ids (ticket and incident ids, versions, hashes: see
    :func:`fact_tokens`). Sentences of fewer than four words lose half their score.
    """
    bags = [_terms(s) for s in sentences]
    n = len(sentences)
    tf: Counter = Counter()
    df: Counter = Counter()
    for bag in bags:
        tf.update(bag)
        df.update(set(bag))
    weights = {t: math.log1p(tf[t]) * math.log((n + 1) / df[t]) for t in tf}
    raw = []
    for bag in bags:
        distinct = set(bag)
        raw.append(sum(weights[t] for t in distinct) / math.sqrt(len(bag) + 1) if distinct else 0.0)
    top = max(raw, default=0.0) or 1.0
    scores = []
    for i, s in enumerate(sentences):
        score = raw[i] / top
        if positions is not None:
            score += 0.4 * positions[i]
        score += 0.25 * min(len(_IDENT.findall(s)), 3)
        if "/" in s or "." in s:
            score += 0.35 * min(len(_PATH.findall(s)), 2)
        if _NUMBER.search(s):
            score += 0.15
        score += 0.6 * min(fact_tokens(s), 2)
        if len(s.split()) < 4 and s.isascii():
            score *= 0.5
        scores.append(score)
    return scores


# ============================================================================ markdown summaries


def _markdown_summary(text: str, max_tokens: int, counter: TokenCounter, key_sentences: bool) -> str:
    if max_tokens <= 0 or not text:
        return ""
    if _fits_quickly(text, max_tokens, counter):
        return text
    doc = _build(text)
    has_headings = any(sec.heading is not None for sec in doc.sections)
    if not has_headings:
        key_sentences = True  # the headings outline of a text without headings is empty
    costs = [_est(t, counter) + 1 for t in doc.texts]
    requires: list[tuple[int, ...]] = [()] * len(doc.texts)
    for sec in doc.sections:
        own = ((sec.heading,) if sec.heading is not None else ()) + sec.ancestors
        if sec.heading is not None:
            requires[sec.heading] = sec.ancestors
        for block in sec.blocks:
            first = block.lines[0].units[0]
            header = first if block.kind == "table" and doc.kinds[first] == "header" else None
            for line in block.lines:
                for uid in line.units:
                    requires[uid] = own + ((header,) if header is not None and uid != header else ())

    order: list[int] = []
    if doc.frontmatter is not None:
        fm_raw = _split_frontmatter(text.replace("\r\n", "\n"))[0] or ""
        if costs[doc.frontmatter] > max_tokens * 0.25:
            tight = compact_frontmatter(fm_raw, tight=True)
            doc.texts[doc.frontmatter] = tight
            costs[doc.frontmatter] = _est(tight, counter) + 1
        early_fm = costs[doc.frontmatter] <= max_tokens * 0.25
        if early_fm:
            order.append(doc.frontmatter)
    heading_ids = sorted(
        (sec.heading for sec in doc.sections if sec.heading is not None),
        key=lambda uid: (doc.sections[doc.where[uid][0]].level, uid),
    )
    # a budget the headings outline would fill (more than half of it): keep the top headings
    # and the best sentences under them rather than bare headings
    squeezed = key_sentences and has_headings and sum(costs[h] for h in heading_ids) > 0.5 * max_tokens
    top_level = min((doc.sections[doc.where[h][0]].level for h in heading_ids), default=0)
    tops = [h for h in heading_ids if doc.sections[doc.where[h][0]].level == top_level]
    # squeezed: a lone top heading (the document's title) stays first; the others come with
    # the sentences under them
    deferred = [h for h in heading_ids if len(tops) > 1 or h not in tops] if squeezed else []
    order.extend(h for h in heading_ids if h not in set(deferred))
    if doc.frontmatter is not None and doc.frontmatter not in order:
        order.append(doc.frontmatter)

    # first paragraph under each heading (the preamble counts as one)
    firsts: list[list[int]] = []
    for sec in doc.sections:
        for block in sec.blocks:
            if block.kind == "code":
                continue
            units = [u for line in block.lines for u in line.units if doc.kinds[u] != "header"]
            if units:
                firsts.append(units)
            break
    if not squeezed and key_sentences:  # sentences of first paragraphs that carry ids come first
        order.extend(u for units in firsts for u in units[1:]
                     if doc.kinds[u] == "sentence" and fact_tokens(doc.texts[u]))
    if not squeezed:
        order.extend(units[0] for units in firsts)  # first sentences
    if key_sentences:
        in_order = set(order)
        # key sentences only matter when the outline and first paragraphs leave room
        outline_cost = sum(costs[u] for u in in_order)
        candidates = [] if outline_cost > 2 * max_tokens else [
            uid
            for uid, kind in enumerate(doc.kinds)
            if uid not in in_order
            and kind in ("sentence", "row", "code")
            and (kind != "code" or doc.texts[uid].count("\n") < _CODE_MAX_LINES)
        ]
        ranked_ids: list[int] = []
        strong: list[int] = []
        if candidates:
            n_secs = max(1, len(doc.sections) - 1)
            positions = []
            for uid in candidates:
                si, bi, k, j = doc.where[uid]
                pos = 0.5 * (1 - si / n_secs) + (0.3 if bi == 0 else 0.0) + (0.2 if j == 0 else 0.0)
                positions.append(pos)
            scores = sentence_scores([doc.texts[u] for u in candidates], positions)
            for i, uid in enumerate(candidates):
                if doc.kinds[uid] == "code":
                    scores[i] *= 0.6
            ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i]))
            ranked_ids = [candidates[i] for i in ranked]
            # sentences that carry fact-like ids (tickets, versions, hashes) come before the
            # rest of the first paragraphs
            strong = [u for u in ranked_ids if doc.kinds[u] == "sentence" and fact_tokens(doc.texts[u])]
        if squeezed:
            order.extend(ranked_ids)
        else:
            order.extend(strong)
            depth = max((len(u) for u in firsts), default=0)
            for k in range(1, depth):  # the rest of the first paragraphs, round-robin
                order.extend(units[k] for units in firsts if k < len(units))
            order.extend(ranked_ids)
    # squeezed: deferred headings come only with a sentence under them (a bare heading says little)
    seen_order: set[int] = set()
    order = [u for u in order if not (u in seen_order or seen_order.add(u))]

    problem = _Problem(costs, requires, order, lambda sel: _render_doc(doc, sel))
    solved = _solve(problem, max_tokens, counter)
    if solved is not None:
        out, selected = solved
        if has_headings and squeezed:
            if out:
                return out
        elif has_headings:
            top = min(sec.level for sec in doc.sections if sec.heading is not None)
            tops = [sec.heading for sec in doc.sections if sec.heading is not None and sec.level == top]
            if all(h in selected for h in tops):
                return out
        elif out:
            return out
    return head_summary(text, max_tokens, counter)


# ============================================================================ head and tail


def head_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The first lines of ``text`` that fit, and a last line saying how many were left out."""
    if max_tokens <= 0 or not text:
        return ""
    if _fits_quickly(text, max_tokens, counter):
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    total = len(lines)
    limit, chars = 0, 0  # only a budget's worth of lines can be chosen: estimate no more
    while limit < total and chars <= max_tokens * 12:
        chars += len(lines[limit]) + 1
        limit += 1

    def render(sel: set[int]) -> str:
        k = 0
        while k in sel:
            k += 1
        return "\n".join(lines[:k] + [f"[… {total - k} more lines not shown]"])

    costs = [_est(line, counter) + 1 for line in lines[:limit]]
    costs[0] += 10  # the note line
    solved = _solve(_Problem(costs, [()] * limit, list(range(limit)), render, prefix=True), max_tokens, counter)
    if solved is None:
        return fit_tokens(text, max_tokens, counter)
    return solved[0]


def tail_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The last lines of ``text`` that fit, after a first line saying how many were left out
    (the fallback for session history; the truncation engine compacts sessions by round)."""
    if max_tokens <= 0 or not text:
        return ""
    if _fits_quickly(text, max_tokens, counter):
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    total = len(lines)
    limit, chars = 0, 0
    while limit < total and chars <= max_tokens * 12:
        chars += len(lines[total - 1 - limit]) + 1
        limit += 1
    order = [total - 1 - i for i in range(limit)]

    def render(sel: set[int]) -> str:
        k = total
        while k - 1 in sel:
            k -= 1
        return "\n".join([f"[… {k} earlier lines not shown]"] + lines[k:])

    costs = [0] * total
    for uid in order:
        costs[uid] = _est(lines[uid], counter) + 1
    costs[order[0]] += 10  # the note line
    solved = _solve(_Problem(costs, [()] * total, order, render, prefix=True), max_tokens, counter)
    if solved is None:
        return _fit_tail(text, max_tokens, counter)
    return solved[0]


def _fit_tail(text: str, max_tokens: int, counter: TokenCounter) -> str:
    tokens = counter.encode(text[-(max_tokens * 12 + 64):])
    tokens = tokens[-max_tokens:] if max_tokens else []
    while tokens:
        cut = safe_suffix(text, len(text) - len(counter.decode(tokens).lstrip("\ufffd")))
        if cut and counter.count(cut) <= max_tokens:
            return cut
        tokens = tokens[max(1, len(tokens) // 50):]
    return ""


# ============================================================================ plan

_COUNT_LINE = re.compile(r"^[ \t]*(?:Tasks|Plans):[ \t]*\d+[ \t]+done\b")
_OPEN_TAG = re.compile(r"^[ \t]*<([A-Za-z_][\w-]*)\b[^>]*>")
_KEY_TAGS = frozenset({"name", "files", "verify", "done", "acceptance", "acceptance_criteria"})
_NOISE_TAGS = frozenset({"context", "execution_context"})
_WRAPPER_TAGS = frozenset({"task", "tasks"})
_LEAD_TAGS = frozenset({"objective"})
_KEY_LABEL = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?\**(?:files?|verify|verification|done|acceptance)\**[ \t]*:", re.I)
_AT_LINE = re.compile(r"^[ \t]*@\S")
_POSITION_LINE = re.compile(r"^(?:Position|Decided by):[ \t]")  # the GSD plan section's position
# ranks of plan units, kept first to last (see plan_summary)
(_R_COUNT, _R_OPEN_BOX, _R_OPEN_KEY, _R_PENDING_BOX, _R_OPEN_DETAIL, _R_PROSE, _R_PENDING_KEY,
 _R_PENDING_DETAIL, _R_DONE_BOX, _R_NOISE) = range(10)


@dataclass
class _PlanUnit:
    first: int  # body line indices, inclusive
    last: int
    role: str  # count | box | heading | key | lead | prose | noise | open | close
    owner: int | None = None  # line index of the top-level task box it belongs to
    pair: int | None = None  # unit id of the matching open / close tag line


def _close_line(lines: Sequence[str], start: int, tag: str) -> int | None:
    """Index of the line at or after ``start`` that closes ``<tag>`` (None when none does)."""
    closing = f"</{tag}>"
    first = lines[start]
    if closing in first[first.index(">") + 1:]:
        return start
    for j in range(start + 1, len(lines)):
        if closing in lines[j]:
            return j
    return None


def _plan_units(lines: Sequence[str], boxes) -> list[_PlanUnit]:
    """The plan's lines as units: task boxes, headings, the count line, whole GSD task
    elements (<name>, <files>, <verify>, <done>) and the <task> wrappers as key units, the
    first line of an <objective>, @ lines, code blocks and <context> blocks as noise, the
    open and close tag lines of other elements as pairs, and every other line as prose."""
    owner_of: dict[int, int] = {}
    top = []
    for box in boxes:
        if any(t.index < box.index <= t.end for t in top):
            continue  # a nested task is detail of its parent
        top.append(box)
        for i in range(box.index + 1, box.end + 1):
            owner_of[i] = box.index
    box_lines = {box.index for box in top}
    units: list[_PlanUnit] = []
    stack: list[tuple[str, int]] = []  # open prose elements: (tag, unit id of the open line)
    lead_wanted = False
    i = 0
    while i < len(lines):
        line = lines[i]
        owner = owner_of.get(i)
        if not line.strip():
            i += 1
            continue
        if i in box_lines:
            units.append(_PlanUnit(i, i, "box", i))
            i += 1
            continue
        fence = _ANY_FENCE.match(line)
        if fence:
            j = i + 1
            while j < len(lines) and not (lines[j].strip().startswith(fence.group(1))
                                          and not lines[j].strip().lstrip(fence.group(1)[0])):
                j += 1
            units.append(_PlanUnit(i, min(j, len(lines) - 1), "noise", owner))
            i = j + 1
            continue
        tag = _OPEN_TAG.match(line)
        name = tag.group(1).lower() if tag else ""
        if line.strip().lower() in ("</task>", "</tasks>") and not (stack and stack[-1][0] in _WRAPPER_TAGS):
            units.append(_PlanUnit(i, i, "key", owner))
            i += 1
            continue
        if stack and line.strip().lower() == f"</{stack[-1][0]}>":
            tag_name, opened = stack.pop()
            units.append(_PlanUnit(i, i, "close", owner, opened))
            units[opened].pair = len(units) - 1
            i += 1
            continue
        if tag and name in _KEY_TAGS | _NOISE_TAGS:
            j = _close_line(lines, i, name)
            j = i if j is None else j
            units.append(_PlanUnit(i, j, "key" if name in _KEY_TAGS else "noise", owner))
            i = j + 1
            continue
        if tag and name in _WRAPPER_TAGS:
            units.append(_PlanUnit(i, i, "key", owner))
            i += 1
            continue
        if tag and name in _LEAD_TAGS | {"action", "output", "success_criteria", "verification", "notes"} or (
                tag and _close_line(lines, i, name) not in (None, i)):
            if _close_line(lines, i, name) == i:  # a one-line element
                units.append(_PlanUnit(i, i, "lead" if name in _LEAD_TAGS else "prose", owner))
            else:
                stack.append((name, len(units)))
                units.append(_PlanUnit(i, i, "open", owner))
                lead_wanted = name in _LEAD_TAGS
            i += 1
            continue
        if _COUNT_LINE.match(line) and owner is None:
            role = "count"
        elif _POSITION_LINE.match(line) and owner is None:
            role = "position"
        elif _HEADING.match(line) and owner is None:
            role = "heading"
        elif _AT_LINE.match(line):
            role = "noise"
        elif _KEY_LABEL.match(line) or _TASK_BOX.match(line):
            role = "key"
        elif lead_wanted and stack:
            role = "lead"
        else:
            role = "prose"
        lead_wanted = False if role == "lead" else lead_wanted
        units.append(_PlanUnit(i, i, role, owner, stack[-1][1] if stack else None))
        i += 1
    return units


_TASK_BOX = re.compile(r"^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+\[.\][ \t]")


def plan_summary(text: str, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """A plan (article plan.md with task boxes, or the GSD plan section and PLAN.md with
    <task> blocks) within ``max_tokens``: whole source lines only, in their order, and a last
    line saying how many were left out. Kept first: the task count line, in-progress task
    lines, the GSD position lines; then the skeleton of the current work (every task's <name>, <files>, <verify> and
    <done>, the <task> tags, Files/Verify/Done lines, the objective's first line, an
    in-progress task's own detail lines); then pending task lines, the prose of in-progress
    elements (<action>), other prose, pending tasks' skeletons and detail, done task lines; @ lines, code blocks and
    <context> blocks last. A heading comes with the first line under it that is kept; done
    and cancelled tasks' detail is only counted. Text with
    neither task boxes nor <task> blocks gets the ``method`` summary (extractive | headings)."""
    if max_tokens <= 0 or not text:
        return ""
    if _fits_quickly(text, max_tokens, counter):
        return text
    norm = text.replace("\r\n", "\n")
    raw_fm, body = _split_frontmatter(norm)
    lines = body.split("\n")
    boxes = _plan.task_boxes(lines)
    if not boxes and "<task" not in body:
        return summarize_text(text, max_tokens, counter, method)
    units = _plan_units(lines, boxes)
    status = {box.index: box.status or _plan.PENDING for box in boxes}
    existing = next((u for u, unit in enumerate(units) if unit.role == "count"), None)
    top = [status[unit.first] for unit in units if unit.role == "box"]
    synthesized = None if existing is not None else _plan.count_line(Counter(top))
    texts = ["\n".join(lines[u.first:u.last + 1]) for u in units]
    total_lines = sum(1 for line in lines if line.strip())

    def rank(u: _PlanUnit) -> int | None:
        state = status.get(u.owner) if u.owner is not None else None
        if u.role in ("count", "position"):
            return _R_COUNT
        if u.role == "box":
            return {_plan.IN_PROGRESS: _R_OPEN_BOX, _plan.PENDING: _R_PENDING_BOX}.get(state, _R_DONE_BOX)
        if state in (_plan.DONE, _plan.CANCELLED):
            return None  # only counted
        if u.role == "heading":
            return None  # comes with the first line under it that is kept
        if u.role == "noise":
            return _R_NOISE
        if u.role in ("key", "lead"):
            return _R_PENDING_KEY if state == _plan.PENDING else _R_OPEN_KEY
        if u.role in ("open", "close"):
            return None  # comes with the lines it encloses
        if state == _plan.PENDING:
            return _R_PENDING_DETAIL
        if state == _plan.IN_PROGRESS:  # a task's own lines stay with it; the prose of an <action> waits
            return _R_OPEN_DETAIL if u.pair is not None else _R_OPEN_KEY
        return _R_PROSE

    ranks = [rank(u) for u in units]
    extra = 1 if synthesized is not None else 0  # unit 0: the synthesized count line
    requires: list[tuple[int, ...]] = [()] * (len(units) + extra)
    heads: list[tuple[int, int]] = []  # the open headings: (level, unit id)
    for uid, unit in enumerate(units):
        need = []
        if unit.role == "heading":
            level = len(_HEADING.match(lines[unit.first]).group(1))
            while heads and heads[-1][0] >= level:
                heads.pop()
            heads.append((level, uid))
        if unit.role != "box":  # a line comes under its headings (a task line stands on its own)
            need.extend(h + extra for _, h in heads if h != uid)
        if unit.owner is not None and unit.role != "box":
            need.append(next(k for k, u in enumerate(units) if u.role == "box" and u.first == unit.owner) + extra)
        if unit.pair is not None:  # an element's lines come with its open and close tag lines
            opened = unit.pair if unit.role != "open" else uid
            need.append(opened + extra)
            if units[opened].pair is not None:
                need.append(units[opened].pair + extra)
        requires[uid + extra] = tuple(k for k in need if k != uid + extra)
    order = ([0] if synthesized is not None else []) + [
        uid + extra for uid in sorted((u for u in range(len(units)) if ranks[u] is not None),
                                      key=lambda u: (ranks[u], units[u].first))]
    blocking = frozenset(uid + extra for uid in range(len(units))
                         if ranks[uid] in (_R_COUNT, _R_OPEN_BOX, _R_PENDING_BOX) and units[uid].role == "box") | (
        {0} if synthesized is not None else {existing})
    first_box = next((u.first for u in units if u.role == "box"), 0)
    fm = compact_frontmatter(raw_fm, tight=True) if raw_fm is not None else None

    def render(sel: set[int]) -> str:
        out: list[str] = [fm] if fm is not None else []
        last_line = None
        shown = 0
        for uid, unit in enumerate(units):
            if synthesized is not None and unit.first >= first_box and 0 in sel and synthesized not in out:
                out.extend(([""] if out else []) + [synthesized, ""])
                last_line = None
            if uid + extra not in sel:
                continue
            if last_line is not None and any(not lines[k].strip() for k in range(last_line + 1, unit.first)):
                out.append("")
            out.append(texts[uid])
            shown += sum(1 for k in range(unit.first, unit.last + 1) if lines[k].strip())
            last_line = unit.last
        if total_lines > shown:
            out.append(f"[… {total_lines - shown} of {total_lines} plan lines not shown]")
        return "\n".join(out).strip("\n")

    all_texts = ([synthesized] if synthesized is not None else []) + texts
    costs = [_est(t, counter) + 1 for t in all_texts]
    costs[0 if synthesized is not None else (existing + extra if existing is not None else 0)] += 12  # the note
    solved = _solve(_Problem(costs, requires, order, render, blocking=blocking), max_tokens, counter)
    if solved is None:
        note = synthesized or (texts[existing] if existing is not None else "")
        return note if note and counter.count(note) <= max_tokens else ""
    return solved[0]


# ============================================================================ diff

_DIFF_HEADER = re.compile(r"^diff --git (?:\"?a/(.+?)\"? \"?b/(.+?)\"?|(\S+) (\S+))$")
_STATUS_LETTER = {
    "added": "A", "new": "A", "modified": "M", "deleted": "D", "removed": "D", "renamed": "R",
    "copied": "C", "untracked": "?", "unmerged": "U", "type changed": "T", "typechange": "T",
}
_STAT_ROW = re.compile(r"^\s*(?:\+\d+/-\d+|binary)\s+\S")  # a "+n/-m status path" row of the git section


def diff_file_stats(diff: str) -> tuple[list[str], list[tuple[str, int, int, str]]]:
    """(lines before the first ``diff --git`` header, [(path, added, removed, status), ...])
    of a git diff; status is A, M, D, R (path "old -> new"), or B for a binary change.
    A diff without ``diff --git`` headers is read by its ``--- a/`` / ``+++ b/`` lines."""
    lines = diff.replace("\r\n", "\n").split("\n")
    preamble: list[str] = []
    files: list[list] = []
    cur: list | None = None
    in_hunk = False
    has_git_headers = any(line.startswith("diff --git ") for line in lines)
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            m = _DIFF_HEADER.match(line)
            if m and m.group(1):
                a, b = m.group(1), m.group(2)
            elif m:
                a, b = m.group(3), m.group(4)
            else:
                a = b = line[11:]
            cur = [b, 0, 0, "M", a]
            files.append(cur)
            in_hunk = False
            continue
        if not has_git_headers and line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = line[4:].split("\t")[0]
            new = lines[i + 1][4:].split("\t")[0]
            path = new[2:] if new.startswith("b/") else new
            if new == "/dev/null":
                path = old[2:] if old.startswith("a/") else old
            cur = [path, 0, 0, "A" if old == "/dev/null" else "D" if new == "/dev/null" else "M", path]
            files.append(cur)
            in_hunk = False
            continue
        if cur is None:
            preamble.append(line)
            continue
        if line.startswith("@@"):
            in_hunk = True
            continue
        if in_hunk:
            if line.startswith("+"):
                cur[1] += 1
            elif line.startswith("-"):
                cur[2] += 1
            continue
        if line.startswith("new file mode"):
            cur[3] = "A"
        elif line.startswith("deleted file mode"):
            cur[3] = "D"
        elif line.startswith("rename from "):
            cur[4] = line[12:]
            cur[3] = "R"
        elif line.startswith("rename to "):
            cur[0] = line[10:]
            cur[3] = "R"
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            if cur[3] == "M":
                cur[3] = "B"
    out = []
    for path, added, removed, status, old in files:
        shown = f"{old} -> {path}" if status == "R" and old != path else path
        out.append((shown, added, removed, status))
    while preamble and not preamble[-1].strip():
        preamble.pop()
    return preamble, out


def _normalise_files(
    files: Iterable[Any], renames: Mapping[str, str] | None
) -> list[tuple[str, int | None, int | None, str]]:
    out = []
    for item in files:
        if isinstance(item, Mapping):
            path = str(item.get("path", "?"))
            added, removed, status = item.get("added"), item.get("removed"), item.get("status")
        else:
            item = list(item) + [None, None, None]
            path, added, removed, status = str(item[0]), item[1], item[2], item[3]
        status = str(status or "modified")
        letter = _STATUS_LETTER.get(status.lower(), status[:1].upper() or "M")
        if renames and path in renames and renames[path] != path:
            letter, path = "R", f"{renames[path]} -> {path}"
        if letter == "?":
            added = removed = None
        elif added is None or removed is None:
            letter = "B" if letter == "M" else letter
        out.append((path, None if added is None else int(added), None if removed is None else int(removed), letter))
    return out


def _file_line(path: str, added: int | None, removed: int | None, status: str) -> str:
    if status == "?":
        return f"? {path} (untracked)"
    if added is None or removed is None:
        return f"{status} {path} (binary)"
    return f"{status} {path} +{added}/-{removed}"


def _context_lines(preamble: list[str]) -> list[str]:
    """The lines before the diff without what the file list replaces: +n/-m rows, the fence
    that opens the patch and the line introducing it."""
    out: list[str] = []
    for line in preamble:
        if _FENCE.match(line):
            if out and out[-1].rstrip().endswith(":"):
                out.pop()
            continue
        if _STAT_ROW.match(line):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def diff_summary(
    text: str,
    max_tokens: int,
    counter: TokenCounter,
    files: Iterable[Any] | None = None,
    renames: Mapping[str, str] | None = None,
) -> str:
    """A git diff (or the git section) as its file list within ``max_tokens``: a total line,
    then ``<status> <path> +n/-m`` per file (A added, M modified, D deleted, R renamed
    "old -> new", B binary, ? untracked). ``files`` ((path, added, removed, status) tuples or
    mappings, as the git section's data) is used instead of parsing when given; ``renames``
    maps new path -> old. The lines before the diff (branch, commits, status lists) follow
    the first one when there is room; +n/-m rows and the patch fence there are dropped. Text
    that is no diff and comes without ``files`` gets its first lines."""
    if max_tokens <= 0 or (not text and not files):
        return ""
    if text and _fits_quickly(text, max_tokens, counter):
        return text
    preamble, parsed = diff_file_stats(text or "")
    stats = _normalise_files(files, renames) if files else [
        (p, None, None, "B") if st == "B" else (p, a, r, st) for p, a, r, st in parsed
    ]
    if not stats:
        return head_summary(text, max_tokens, counter)
    context = _context_lines(preamble)
    tracked = [s for s in stats if s[3] != "?"]
    total_add = sum(s[1] or 0 for s in tracked)
    total_del = sum(s[2] or 0 for s in tracked)
    untracked = len(stats) - len(tracked)
    header = f"{len(tracked)} file{'s' if len(tracked) != 1 else ''} changed, +{total_add}/-{total_del}"
    if untracked:
        header += f"; {untracked} untracked"
    file_lines = [_file_line(*s) for s in stats]
    texts = [header] + file_lines + context
    nf = len(file_lines)
    pre_ids = list(range(1 + nf, len(texts)))

    def render(sel: set[int]) -> str:
        out = [texts[u] for u in pre_ids if u in sel]
        if out:
            out.append("")
        out.append(header)
        shown = [u for u in range(1, 1 + nf) if u in sel]
        out.extend(texts[u] for u in shown)
        missing = nf - len(shown)
        if missing and shown:
            rest = [stats[u - 1] for u in range(1, 1 + nf) if u not in sel]
            rest_add = sum(s[1] or 0 for s in rest)
            rest_del = sum(s[2] or 0 for s in rest)
            out.append(f"… {missing} more file{'s' if missing != 1 else ''} (+{rest_add}/-{rest_del})")
        return "\n".join(out)

    costs = [_est(t, counter) + 1 for t in texts]
    costs[0] += 12  # room for the "… n more files" line
    order = [0] + pre_ids[:1] + list(range(1, 1 + nf)) + pre_ids[1:]
    problem = _Problem(costs, [()] * len(texts), order, render, blocking=frozenset(range(1 + nf)))
    solved = _solve(problem, max_tokens, counter)
    if solved is None:
        return fit_tokens(header, max_tokens, counter)
    return solved[0]

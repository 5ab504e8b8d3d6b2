"""The extractive and headings summaries of markdown: the priority order of the units, then
the fit (fit.py) of the document model (document.py)."""

from __future__ import annotations

from dataclasses import replace

from ..quote import quoted
from ..tokens import TokenCounter, estimate_tokens
from .code import code_line_order
from .document import build, render_doc
from .fit import Problem, fits_quickly, solve
from .frontmatter import compact_frontmatter, frontmatter_within, split_frontmatter
from .headtail import head_summary
from .protocol import METHODS  # the summarizer variants (config key truncation.summarizer)
from .scoring import fact_tokens, sentence_scores


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


def _markdown_summary(text: str, max_tokens: int, counter: TokenCounter, key_sentences: bool) -> str:
    """The markdown summary: units in priority order (:func:`_priority_order`), fitted by
    :func:`solve`; the first lines when the top-level headings do not fit."""
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    doc = build(text)
    has_headings = any(sec.heading is not None for sec in doc.sections)
    key_sentences = key_sentences or not has_headings  # the outline of a text without headings is empty
    costs = [estimate_tokens(t) + 1 for t in doc.texts]
    order, squeezed = _priority_order(doc, text, costs, max_tokens, key_sentences, has_headings)
    problem = Problem(costs, _requirements(doc), order, lambda sel: render_doc(doc, sel),
                      fuller=lambda sel, room: _fuller_doc(doc, text, sel, room, counter))
    solved = solve(problem, max_tokens, counter)
    if solved is not None and _acceptable(doc, *solved, has_headings, squeezed):
        return solved[0]
    return head_summary(text, max_tokens, counter)


def _fuller_doc(doc, text: str, selected: set[int], room: int, counter: TokenCounter) -> str | None:
    """The ``selected`` units rendered with the frontmatter as written, within its compact
    form's tokens plus ``room`` (see :class:`~.fit.Problem`); None without a frontmatter."""
    raw = split_frontmatter(text.replace("\r\n", "\n"))[0] if doc.frontmatter is not None else None
    fm = frontmatter_within(raw, counter.count(doc.texts[doc.frontmatter]) + room, counter) if raw else None
    if fm is None:
        return None
    texts = list(doc.texts)
    texts[doc.frontmatter] = fm
    return render_doc(replace(doc, texts=texts), selected)


def _requirements(doc) -> list[tuple[int, ...]]:
    """Per unit, the units it needs: its headings (and their ancestors), a table row its header."""
    requires: list[tuple[int, ...]] = [()] * len(doc.texts)
    for sec in doc.sections:
        own = ((sec.heading,) if sec.heading is not None else ()) + sec.ancestors
        if sec.heading is not None:
            requires[sec.heading] = sec.ancestors
        for block in sec.blocks:
            if block.code is not None:  # code lines need their fences; the fences their headings
                requires[block.code.fence] = own
                for uid in block.code.units:
                    if uid is not None:
                        requires[uid] = own + (block.code.fence,)
                continue
            first = block.lines[0].units[0]
            header = first if block.kind == "table" and doc.kinds[first] == "header" else None
            for line in block.lines:
                for uid in line.units:
                    requires[uid] = own + ((header,) if header is not None and uid != header else ())
    return requires


def _priority_order(doc, text: str, costs: list[int], max_tokens: int, key_sentences: bool,
                    has_headings: bool) -> tuple[list[int], bool]:
    """(unit ids in the order they are kept, squeezed): see the package docstring. Squeezed:
    the headings outline would fill more than half of the budget, so the top headings and the
    best sentences under them come before bare headings."""
    early_fm = _fit_frontmatter(doc, text, costs, max_tokens)
    heading_ids = _heading_ids(doc)
    squeezed = key_sentences and has_headings and sum(costs[h] for h in heading_ids) > 0.5 * max_tokens
    order = _outline_order(doc, heading_ids, early_fm, squeezed)
    firsts = _first_paragraphs(doc)
    if not squeezed:
        order += _first_sentence_order(doc, firsts, key_sentences)
    if key_sentences:
        order += _key_order(doc, order, costs, max_tokens, firsts, squeezed)
    # squeezed: deferred headings come only with a sentence under them (a bare heading says little)
    return _without_repeats(order), squeezed


def _heading_ids(doc) -> list[int]:
    """The headings' unit ids, shallow levels first, then in document order."""
    return sorted((sec.heading for sec in doc.sections if sec.heading is not None),
                  key=lambda uid: (doc.sections[doc.where[uid][0]].level, uid))


def _outline_order(doc, heading_ids: list[int], early_fm: bool, squeezed: bool) -> list[int]:
    """The start of the order: the frontmatter when it comes first, the headings kept up front,
    then the frontmatter when it did not come first."""
    order = [doc.frontmatter] if early_fm else []
    order.extend(_kept_headings(doc, heading_ids, squeezed))
    if doc.frontmatter is not None and doc.frontmatter not in order:
        order.append(doc.frontmatter)
    return order


def _first_sentence_order(doc, firsts: list[list[int]], key_sentences: bool) -> list[int]:
    """After the outline (when not squeezed): with key sentences, the sentences of first
    paragraphs that carry fact-like ids; then the first sentence of each first paragraph."""
    facts = [u for units in firsts for u in units[1:]
             if doc.kinds[u] == "sentence" and fact_tokens(doc.texts[u])] if key_sentences else []
    return facts + [units[0] for units in firsts]


def _key_order(doc, order: list[int], costs: list[int], max_tokens: int, firsts: list[list[int]],
               squeezed: bool) -> list[int]:
    """What follows with key sentences: the first line of each code block (not squeezed), then
    the key sentences and the other code lines in proportion (squeezed: every code line there)."""
    code_firsts, code_rest = _code_order(doc)
    lead = [] if squeezed else code_firsts
    rest = code_firsts + code_rest if squeezed else code_rest
    prose = _key_sentence_order(doc, order + lead, costs, max_tokens, firsts, squeezed)
    return lead + _in_proportion(prose, rest, costs)


def _without_repeats(order: list[int]) -> list[int]:
    """``order`` with each unit id at its first place only."""
    return list(dict.fromkeys(order))


def _fit_frontmatter(doc, text: str, costs: list[int], max_tokens: int) -> bool:
    """Compacts the frontmatter harder when it would take over a quarter of the budget; whether
    it then comes first (it still fits in that quarter)."""
    if doc.frontmatter is None:
        return False
    if costs[doc.frontmatter] > max_tokens * 0.25:
        tight = compact_frontmatter(split_frontmatter(text.replace("\r\n", "\n"))[0] or "", tight=True)
        doc.texts[doc.frontmatter] = tight
        costs[doc.frontmatter] = estimate_tokens(tight) + 1
    return costs[doc.frontmatter] <= max_tokens * 0.25


def _kept_headings(doc, heading_ids: list[int], squeezed: bool) -> list[int]:
    """The headings kept up front: all of them, or when squeezed only a lone top heading (the
    document's title); the others then come with the sentences under them."""
    if not squeezed:
        return heading_ids
    top_level = min((doc.sections[doc.where[h][0]].level for h in heading_ids), default=0)
    tops = [h for h in heading_ids if doc.sections[doc.where[h][0]].level == top_level]
    return [h for h in heading_ids if len(tops) == 1 and h in tops]


def _first_paragraphs(doc) -> list[list[int]]:
    """The sentence (or row) ids of the first paragraph under each heading (the preamble counts as one)."""
    firsts: list[list[int]] = []
    for sec in doc.sections:
        for block in sec.blocks:
            if block.kind == "code":
                continue
            units = [u for line in block.lines for u in line.units if doc.kinds[u] != "header"]
            if units:
                firsts.append(units)
            break
    return firsts


def _key_sentence_order(doc, order: list[int], costs: list[int], max_tokens: int, firsts: list[list[int]],
                        squeezed: bool) -> list[int]:
    """What follows the outline: sentences carrying fact-like ids, the rest of the first
    paragraphs round-robin, then key sentences by score (squeezed: by score only)."""
    in_order = set(order)
    ranked = [] if sum(costs[u] for u in in_order) > 2 * max_tokens else _ranked_candidates(doc, in_order)
    if squeezed:
        return ranked
    # sentences that carry fact-like ids (tickets, versions, hashes) come before the rest of the first paragraphs
    out = [u for u in ranked if doc.kinds[u] == "sentence" and fact_tokens(doc.texts[u])]
    depth = max((len(u) for u in firsts), default=0)
    for k in range(1, depth):  # the rest of the first paragraphs, round-robin
        out.extend(units[k] for units in firsts if k < len(units))
    return out + ranked


def _ranked_candidates(doc, in_order: set[int]) -> list[int]:
    """Sentences and rows not yet in the order, best score first (position counts: earlier
    sections, first blocks, first sentences)."""
    candidates = [uid for uid, kind in enumerate(doc.kinds)
                  if uid not in in_order and kind in ("sentence", "row")]
    if not candidates:
        return []
    n_secs = max(1, len(doc.sections) - 1)
    positions = []
    for uid in candidates:
        si, bi, _, j = doc.where[uid]
        positions.append(0.5 * (1 - si / n_secs) + (0.3 if bi == 0 else 0.0) + (0.2 if j == 0 else 0.0))
    scores = sentence_scores([doc.texts[u] for u in candidates], positions)
    return [candidates[i] for i in sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i]))]


def _code_order(doc) -> tuple[list[int], list[int]]:
    """(the first line of each fenced block, the other code lines in the order they are kept):
    see :func:`~.code.code_line_order`."""
    blocks = [[(u, doc.texts[u]) for u in block.code.units if u is not None]
              for sec in doc.sections for block in sec.blocks if block.code is not None]
    firsts, definitions, others = code_line_order(blocks)
    return firsts, definitions + others


def _in_proportion(first: list[int], second: list[int], costs: list[int]) -> list[int]:
    """``first`` and ``second`` merged so that any prefix of the result holds about the same
    share of each list's estimated tokens (each list keeps its own order): a summary that stops
    anywhere keeps prose and code in proportion."""
    total_a = sum(costs[u] for u in first) or 1
    total_b = sum(costs[u] for u in second) or 1
    out: list[int] = []
    i = j = used_a = used_b = 0
    while i < len(first) or j < len(second):
        if j >= len(second) or (i < len(first) and used_a / total_a <= used_b / total_b):
            used_a += costs[first[i]]
            out.append(first[i])
            i += 1
        else:
            used_b += costs[second[j]]
            out.append(second[j])
            j += 1
    return out


def _acceptable(doc, out: str, selected: set[int], has_headings: bool, squeezed: bool) -> bool:
    """Whether a fitted summary is kept: non-empty and, unless squeezed, with every top-level heading."""
    if not has_headings or squeezed:
        return bool(out)
    top = min(sec.level for sec in doc.sections if sec.heading is not None)
    return all(sec.heading in selected for sec in doc.sections if sec.heading is not None and sec.level == top)

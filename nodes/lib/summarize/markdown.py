"""The extractive and headings summaries of markdown: the priority order of the units, then
the fit (fit.py) of the document model (document.py)."""

from __future__ import annotations

from ..tokens import TokenCounter, estimate_tokens
from .document import CODE_MAX_LINES, build, render_doc
from .fit import Problem, fits_quickly, solve
from .frontmatter import compact_frontmatter, split_frontmatter
from .headtail import head_summary
from .scoring import fact_tokens, sentence_scores

#: The summarizer variants (config key truncation.summarizer).
METHODS = ("extractive", "headings")


def summarize_text(text: str, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """Markdown summary of ``text`` by ``method`` (extractive | headings)."""
    if method == "headings":
        return headings_summary(text, max_tokens, counter)
    if method == "extractive":
        return extractive_summary(text, max_tokens, counter)
    raise ValueError(f"unknown summarizer {method!r}; use one of: {', '.join(METHODS)}")


def extractive_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Frontmatter, headings, first paragraph per heading, then key sentences, within
    ``max_tokens``; degrades to headings + first sentences, headings only, the first lines."""
    return _markdown_summary(text, max_tokens, counter, key_sentences=True)


def headings_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Frontmatter, the headings outline and the first sentence under each heading, within
    ``max_tokens``. Text without any heading gets the extractive summary instead."""
    return _markdown_summary(text, max_tokens, counter, key_sentences=False)


def _markdown_summary(text: str, max_tokens: int, counter: TokenCounter, key_sentences: bool) -> str:
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    doc = build(text)
    has_headings = any(sec.heading is not None for sec in doc.sections)
    if not has_headings:
        key_sentences = True  # the headings outline of a text without headings is empty
    costs = [estimate_tokens(t) + 1 for t in doc.texts]
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
        fm_raw = split_frontmatter(text.replace("\r\n", "\n"))[0] or ""
        if costs[doc.frontmatter] > max_tokens * 0.25:
            tight = compact_frontmatter(fm_raw, tight=True)
            doc.texts[doc.frontmatter] = tight
            costs[doc.frontmatter] = estimate_tokens(tight) + 1
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
            and (kind != "code" or doc.texts[uid].count("\n") < CODE_MAX_LINES)
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

    problem = Problem(costs, requires, order, lambda sel: render_doc(doc, sel))
    solved = solve(problem, max_tokens, counter)
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

"""Cutting text at paragraph or line boundaries to an exact token budget, with a marker
saying how much was cut and where the full text is."""

from __future__ import annotations

from dataclasses import dataclass

from ..summarize.lines import closing_fence, open_fence, prose_cut, whole_line_only
from .measure import DEFAULT_CHARS_PER_TOKEN


MARKER = "[… {tokens} tokens cut{where}]"


def cut_marker(tokens: int, location: str | None = None, lines: tuple[int, int] | None = None,
               estimated: bool = False) -> str:
    """The marker left where text was cut: how much, and where the full text is, e.g.
    ``[… 1,234 tokens cut; full text: .planning/references/arch.md lines 40-120]``."""
    where = ""
    if location:
        span = ""
        if lines is not None:
            span = f" line {lines[0]}" if lines[0] == lines[1] else f" lines {lines[0]}-{lines[1]}"
        where = f"; full text: {location}{span}"
    amount = f"about {tokens:,}" if estimated else f"{tokens:,}"
    return MARKER.format(tokens=amount, where=where)


@dataclass(frozen=True)
class Cut:
    """A text cut down to a budget: the new text, its exact tokens, and what was cut."""

    text: str
    tokens: int
    cut_tokens: int
    cut_lines: tuple[int, int] | None  # 1-based lines of the input that were cut (None: nothing)


@dataclass(frozen=True)
class Origin:
    """Where a section's full text is, for markers: its location and the file line of its
    first content line (None when unknown)."""

    location: str | None = None
    first_line: int | None = None

    def lines(self, first: int, last: int) -> tuple[int, int] | None:
        """File lines of content lines ``first``-``last`` (1-based), when known."""
        if self.first_line is None:
            return None
        return (self.first_line + first - 1, self.first_line + last - 1)


SHAPES = ("head", "tail", "middle")


def cut_text(text: str, keep: int, counter, shape: str = "head", origin: Origin | None = None,
             tokens: int | None = None, estimated: bool = False) -> Cut:
    """``text`` cut to at most ``keep`` tokens (exact, marker included) at a paragraph or line
    boundary, with a marker saying how much was cut and where the full text is.

    ``head`` keeps the beginning, ``tail`` the end, ``middle`` both ends. ``tokens`` is the
    text's token count when the caller has it (``estimated``: an estimate). A first line longer
    than the budget is cut at a token boundary. With a budget below the marker itself the
    result is the marker alone (its ``tokens`` then exceed ``keep``).
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    origin = origin or Origin()
    total = counter.count(text) if tokens is None else tokens
    if total <= keep:
        return Cut(text, total, 0, None)
    last_line = text.count("\n") + (0 if text.endswith("\n") else 1)
    slack = 0
    for _ in range(4):
        probe = cut_marker(total, origin.location, origin.lines(last_line, last_line), estimated)
        body = keep - counter.count(probe) - 2 - slack
        head_budget, tail_budget = _shape_budgets(shape, body)
        head_end, head_tokens = _prefix_end(text, head_budget, counter)
        tail_start, tail_tokens = _suffix_start(text, tail_budget, counter, floor=head_end)
        head, tail = text[:head_end].rstrip("\n"), text[tail_start:].lstrip("\n")
        head, tail = _fenced(head, tail, open_fence(text[:tail_start]) if tail else None)
        first_cut = text.count("\n", 0, head_end) + 1
        last_cut = last_line - (text[tail_start:].count("\n") + (0 if text.endswith("\n") else 1)) if tail else last_line
        lines = (first_cut, max(first_cut, last_cut))
        cut_tokens = max(0, total - head_tokens - tail_tokens)
        marker = cut_marker(cut_tokens, origin.location, origin.lines(*lines), estimated)
        result = "\n".join(part for part in (head, marker, tail) if part)
        result_tokens = counter.count(result)
        if result_tokens <= keep or body <= 0:
            break
        slack += result_tokens - keep
    return Cut(result, result_tokens, cut_tokens, lines)


def _fenced(head: str, tail: str, tail_fence: str | None) -> tuple[str, str]:
    """The kept beginning and end of a cut with their code blocks whole: a block the beginning
    ends inside is closed (or left out when only its opening fence is kept), a block the end
    starts inside is opened again (or its lone closing fence left out)."""
    fence = open_fence(head) if head else None
    if fence is not None:
        lines = head.split("\n")
        head = "\n".join(lines[:-1]) if lines[-1] == fence else head + "\n" + closing_fence(fence)
    if tail_fence is not None:
        first, _, rest = tail.partition("\n")
        tail = rest if first.strip() == closing_fence(tail_fence).strip() else tail_fence + "\n" + tail
    return head, tail


def _shape_budgets(shape: str, body: int) -> tuple[int, int]:
    """Tokens for the kept beginning and the kept end of a cut of ``shape``."""
    if body <= 0:
        return 0, 0
    if shape == "head":
        return body, 0
    if shape == "tail":
        return 0, body
    return body - body // 2, body // 2


def _prefix_end(text: str, budget: int, counter) -> tuple[int, int]:
    """(end, tokens): the longest prefix ending at a line boundary (a paragraph boundary when
    one is near) whose exact count fits ``budget``; a token-level cut when no line fits."""
    if budget <= 0:
        return 0, 0
    end, tokens = _longest_prefix(text, budget, counter)
    if end == 0:
        return _token_prefix(text, budget, counter)
    if text.startswith("\n\n", end - 2) or text.startswith("\n", end):
        return end, tokens  # already at a paragraph boundary
    paragraph = text.rfind("\n\n", 0, end - 1)
    if paragraph > 0 and end - paragraph <= max(240, end // 8):
        cut = paragraph + 2
        return cut, max(0, tokens - counter.count(text[cut:end]))
    return end, tokens


def _suffix_start(text: str, budget: int, counter, floor: int = 0) -> tuple[int, int]:
    """(start, tokens): the longest suffix after ``floor`` starting at a line start (a
    paragraph start when one is near) whose exact count fits ``budget``."""
    if budget <= 0:
        return len(text), 0
    start, tokens = _longest_suffix(text, budget, counter, floor)
    if start >= len(text):
        return len(text), 0
    if start <= floor or text.startswith("\n\n", start - 2) or text.startswith("\n", start):
        return start, tokens  # already at a paragraph boundary
    paragraph = text.find("\n\n", start)
    if 0 <= paragraph and paragraph + 2 < len(text) and paragraph - start <= max(240, (len(text) - start) // 8):
        cut = paragraph + 2
        return cut, max(0, tokens - counter.count(text[start:cut]))
    return start, tokens


def _longest_prefix(text: str, budget: int, counter) -> tuple[int, int]:
    """The longest line-boundary prefix within ``budget`` exact tokens: a few exact counts of
    candidates, each guessed from the characters per token observed so far."""
    n = len(text)
    fit, fit_tokens, over = 0, 0, n + 1
    guess = budget * DEFAULT_CHARS_PER_TOKEN
    for _ in range(10):
        cand = n if guess >= n else text.rfind("\n", 0, int(guess)) + 1
        if cand <= fit:
            nxt = text.find("\n", fit)
            cand = n if nxt < 0 else nxt + 1
        if cand >= over or cand <= fit:
            break
        count = counter.count(text[:cand])
        ratio = cand / count if count else DEFAULT_CHARS_PER_TOKEN
        if count <= budget:
            fit, fit_tokens = cand, count
            if cand == n or budget - count <= max(2, budget // 100):
                break
            guess = cand + (budget - count) * ratio
        else:
            over = cand
            guess = budget * ratio * 0.98
    return fit, fit_tokens


def _longest_suffix(text: str, budget: int, counter, floor: int = 0) -> tuple[int, int]:
    """The longest suffix starting at a line start at or after ``floor`` within ``budget``
    exact tokens (the mirror of :func:`_longest_prefix`)."""
    n = len(text)
    fit, fit_tokens, over = n, 0, floor - 1
    guess = budget * DEFAULT_CHARS_PER_TOKEN
    for _ in range(10):
        pos = n - int(guess)
        if pos <= floor:
            cand = floor
        else:
            nl = text.find("\n", pos - 1)
            cand = n if nl < 0 else nl + 1
        if cand >= fit:
            prev = text.rfind("\n", floor, fit - 1) if fit - 1 > floor else -1
            cand = prev + 1 if prev >= 0 else floor
        if cand <= over or cand >= fit:
            break
        count = counter.count(text[cand:])
        ratio = (n - cand) / count if count else DEFAULT_CHARS_PER_TOKEN
        if count <= budget:
            fit, fit_tokens = cand, count
            if cand == floor or budget - count <= max(2, budget // 100):
                break
            guess = (n - cand) + (budget - count) * ratio
        else:
            over = cand
            guess = budget * ratio * 0.98
    return fit, fit_tokens


def _token_prefix(text: str, budget: int, counter) -> tuple[int, int]:
    """(end, tokens): part of the first line, when not even it fits: nothing of a code line,
    an ``@`` line or a table row (kept whole or not at all); prose up to the last sentence
    end that fits, else the last whole word."""
    first = text.split("\n", 1)[0]
    if whole_line_only(first):
        return 0, 0
    window = first[: budget * 16 + 64]
    prefix = counter.decode(counter.encode(window)[:budget]).rstrip("\ufffd")
    while prefix and not window.startswith(prefix):
        prefix = prefix[:-1]
    end = prose_cut(first, len(prefix))
    count = counter.count(first[:end])
    while count > budget and end > 0:
        end = prose_cut(first, end - 1)
        count = counter.count(first[:end])
    return end, count

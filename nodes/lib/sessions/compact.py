"""A session history compacted for the context: the older rounds as summary bullets, the recent
ones verbatim, and the counts for its end."""

from __future__ import annotations

from typing import Sequence

from ...types import Round
from .render import render_rounds
from .summary import summarize_rounds


def verbatim_start(count: int, keep_last: int, block: int = 1) -> int:
    """Index of the first verbatim round of ``count``: at least the last ``keep_last`` verbatim,
    the older ones summarised ``block`` at a time, so the boundary moves every ``block`` rounds."""
    older = max(0, count - max(0, int(keep_last)))
    block = max(1, int(block))
    return older // block * block


def compact_history(rounds: Sequence[Round], keep_last: int, summaries: Sequence[str] | None = None) -> str:
    """The last ``keep_last`` rounds verbatim, every older round as one summary bullet
    (``summaries``: every round's bullet, as the ``round_summaries`` node has them). No counts
    in the headings: a new round only appends (or moves the boundary), the text before stays."""
    rounds = tuple(rounds)
    keep_last = max(0, min(int(keep_last), len(rounds)))
    split = len(rounds) - keep_last
    older, recent = rounds[:split], rounds[split:]
    parts = []
    if older:
        parts.append("Earlier rounds, summarised:\n"
                     + summarize_rounds(older, None if summaries is None else tuple(summaries)[:split]))
    if recent:
        parts.append("Recent rounds, verbatim:\n\n" + render_rounds(recent))
    return "\n\n".join(parts)


def history_trailer(rounds: Sequence[Round], verbatim_from: int, extra: str = "") -> str:
    """The counts of a history, for its end: "(12 rounds: 1-7 summarised, 8-12 verbatim)"
    (``extra`` follows the count: " in 2 sessions")."""
    rounds = tuple(rounds)
    spans = []
    for label, group in (("summarised", rounds[:verbatim_from]), ("verbatim", rounds[verbatim_from:])):
        if group:
            first, last = group[0].index, group[-1].index
            spans.append(f"{first}-{last} {label}" if first != last else f"{first} {label}")
    return f"({len(rounds)} round{'' if len(rounds) == 1 else 's'}{extra}: {', '.join(spans)})"

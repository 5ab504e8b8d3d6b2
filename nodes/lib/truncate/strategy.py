"""Strategies: how a section gives up tokens (tail, head, middle), as frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...types import Round
from .history_fit import DROPPED, LEVELS, VERBATIM, HistoryFit, fit_history, keep_first_rounds
from .textcut import Origin, cut_text


@dataclass(frozen=True)
class Reduced:
    """A section's new content after one step: text, exact tokens, the ledger action, and the
    section data that changes with it (a history's kept rounds)."""

    content: str
    tokens: int
    action: str
    data: Mapping[str, Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Strategy:
    """How content gives up tokens. ``tail`` keeps the end (a history: its recent rounds
    verbatim, older ones graded), ``head`` the beginning (a history: its oldest rounds),
    ``middle`` both ends and summarizes between (a history: its first and newest rounds).
    ``summarizer`` (middle) summarizes a section before anything is cut."""

    name: str
    summarizer: Any = None
    keep_last: int = 1
    recent_share: float = 0.75
    render_round: Callable[[Round], str] | None = None
    round_summary: Callable[[Round], str] | None = None

    def reduce_history(self, section, keep: int, counter, keep_all: bool = False) -> Reduced:
        """A history section within ``keep`` tokens, whole rounds and tool groups only
        (``keep_all``, tail: no round dropped, at most down to its summary floor)."""
        rounds = tuple(section.data.get("rounds", ()))
        location = origin_of(section).location
        if self.name == "tail":
            fit = fit_history(rounds, keep, counter, self.render_round, self.round_summary,
                              self.keep_last, self.recent_share, location,
                              int(section.data.get("verbatim_from", 0) or 0), keep_all)
        else:
            fit = keep_first_rounds(rounds, keep, counter, self.render_round, location, self.name)
        levels = {LEVELS[level]: sum(1 for lv in fit.levels if lv == level) for level in range(4)}
        data = {**section.data, "rounds": fit.rounds, "levels": fit.levels,
                "verbatim_from": _verbatim_from(fit)}
        action = "cut" if fit.trimmed_newest else "compacted"
        note = ", ".join(f"{n} {name}" for name, n in levels.items() if n)
        return Reduced(fit.text, fit.tokens, action, data, f"rounds: {note}")

    def summarize(self, section, keep: int, counter) -> Reduced | None:
        """The summarizer's summary within ``keep`` tokens (cut when it comes out longer), or
        None when there is no summarizer or the summary saves nothing."""
        if self.summarizer is None:
            return None
        text = self.summarizer.summarize(section, keep, counter)
        tokens = counter.count(text)
        if tokens > keep:
            cut = cut_text(text, keep, counter, "head", Origin(origin_of(section).location), tokens)
            text, tokens = cut.text, cut.tokens
        return Reduced(text, tokens, "summarized", note=f"summary capped at {keep:,} tokens")

    def cut(self, section, keep: int, counter, tokens: int, estimated: bool, pristine: bool) -> Reduced:
        """``section`` cut to ``keep`` tokens in this strategy's shape, with a marker."""
        if is_history(section):
            return self.reduce_history(section, keep, counter)
        origin = origin_of(section) if pristine else Origin(origin_of(section).location)
        cut = cut_text(section.content, keep, counter, self.name, origin, tokens, estimated)
        lines = f"; lines {cut.cut_lines[0]}-{cut.cut_lines[1]} of the section cut" if cut.cut_lines else ""
        return Reduced(cut.text, cut.tokens, "cut", note=f"{self.name} kept{lines}")


def _verbatim_from(fit: HistoryFit) -> int:
    """Index (into the kept rounds) of the first of the verbatim rounds at the end."""
    kept_levels = [lv for lv in fit.levels if lv != DROPPED]
    i = len(kept_levels)
    while i > 0 and kept_levels[i - 1] == VERBATIM:
        i -= 1
    return i


def is_history(section) -> bool:
    """Whether a section is a session history with its rounds (cut by whole rounds)."""
    return section.kind == "history" and bool(section.data.get("rounds"))


def origin_of(section) -> Origin:
    """Where a section's full text lives: its first source with a location, and the file line
    of its first content line when the source names its lines."""
    for source in section.sources:
        if source.kind in ("file", "url", "builtin", "git") and source.location:
            return Origin(source.location, source.lines[0] if source.lines else None)
    return Origin()

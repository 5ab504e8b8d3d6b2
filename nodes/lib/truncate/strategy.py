"""Strategies: how a section gives up tokens (tail, head, middle), as frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

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


@runtime_checkable
class Strategy(Protocol):
    """How a section gives up tokens: what the ``tail_strategy``, ``head_strategy`` and
    ``middle_strategy`` nodes return (:class:`BuiltinStrategy`, or your own by swapping a node).

    ``name``: tail | head | middle. ``summarizer``: a Summarizer or None; when set, a section is
    summarized (``summarize``) before anything is cut. The truncation steps call:

    * ``summarize(section, keep, counter)``: a :class:`Reduced` summary within ``keep`` tokens,
      or None (no summarizer, or nothing saved).
    * ``cut(section, keep, counter, tokens, estimated, pristine)``: ``section`` cut to at most
      ``keep`` tokens. ``counter`` counts exactly (``counter.count(text)``); ``tokens`` is the
      section's size now; ``estimated``: that size is the chars/4 estimate, not an exact count;
      ``pristine``: the section is still its original text, so a marker may name its file lines.
      A history section (``section.data["rounds"]``) must be cut by whole rounds.
    * ``reduce_history(section, keep, counter, keep_all=False, whole_rounds=False)``: a history
      within ``keep`` tokens by whole rounds (``keep_all``: fold older rounds, drop none; the
      tail strategy). Unless ``whole_rounds`` (the slack refill's first pass), what the whole
      rounds leave is given back to rounds trimmed inside.

    Return ``Reduced(content, tokens, action, data=None, note="")`` with the exact token count
    and the ledger action (cut | summarized | compacted). Wrap the built-in to change one part::

        from dataclasses import dataclass
        from ctxengine.nodes.lib.summarize import Summarizer
        from ctxengine.nodes.lib.truncate import BuiltinStrategy, Reduced, Strategy, is_history

        @dataclass(frozen=True)
        class FirstParagraph(BuiltinStrategy):
            def cut(self, section, keep, counter, tokens, estimated, pristine):
                if is_history(section):
                    return super().cut(section, keep, counter, tokens, estimated, pristine)
                text = section.content.split("\n\n")[0]
                if counter.count(text) > keep:
                    return super().cut(section, keep, counter, tokens, estimated, pristine)
                return Reduced(text, counter.count(text), "cut", note="first paragraph kept")

        def middle_strategy(summarizer: Summarizer) -> Strategy:   # in my_nodes.py
            return FirstParagraph("middle", summarizer)
    """

    name: str
    summarizer: Any

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        """A class is a Strategy when it has every member (structural, like isinstance): Python
        refuses issubclass() on a protocol with data members, and Hamilton checks types with it."""
        if cls is not Strategy:
            return NotImplemented
        members = ("name", "summarizer", "summarize", "cut", "reduce_history")
        return all(any(m in vars(b) or m in vars(b).get("__annotations__", {}) for b in other.__mro__)
                   for m in members) or NotImplemented

    def summarize(self, section, keep: int, counter) -> Reduced | None: ...

    def cut(self, section, keep: int, counter, tokens: int, estimated: bool, pristine: bool) -> Reduced: ...

    def reduce_history(self, section, keep: int, counter, keep_all: bool = False,
                       whole_rounds: bool = False) -> Reduced: ...


@dataclass(frozen=True)
class BuiltinStrategy:
    """How content gives up tokens (the built-in :class:`Strategy`). ``tail`` keeps the end (a history: its recent rounds
    verbatim, older ones graded), ``head`` the beginning (a history: its oldest rounds),
    ``middle`` both ends and summarizes between (a history: its first and newest rounds).
    ``summarizer`` (middle) summarizes a section before anything is cut."""

    name: str
    summarizer: Any = None
    keep_last: int = 1
    recent_share: float = 0.75
    render_round: Callable[[Round], str] | None = None
    round_summary: Callable[[Round], str] | None = None

    def reduce_history(self, section, keep: int, counter, keep_all: bool = False,
                       whole_rounds: bool = False) -> Reduced:
        """A history section within ``keep`` tokens, whole rounds and tool groups only
        (``keep_all``, tail: no round dropped, at most down to its summary floor); the room the
        whole rounds leave is given back to rounds trimmed inside unless ``whole_rounds``."""
        rounds = tuple(section.data.get("rounds", ()))
        location = origin_of(section).location
        if self.name == "tail":
            fit = fit_history(rounds, keep, counter, self.render_round, self.round_summary,
                              self.keep_last, self.recent_share, location,
                              int(section.data.get("verbatim_from", 0) or 0), keep_all, not whole_rounds)
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
        if text.strip() == section.content.strip() or tokens >= counter.count(section.content):
            return None  # it saves nothing: the caller cuts the section in its own shape (and says so)
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

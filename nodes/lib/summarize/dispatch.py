"""The summarizer value and the dispatch of a section to the summary of its kind."""

from __future__ import annotations

from dataclasses import dataclass

from ...types import ConfigError, Section
from ..quote import quoted
from ..tokens import TokenCounter
from .protocol import METHODS, Summarizer


@dataclass(frozen=True)
class BuiltinSummarizer:
    """The built-in :class:`Summarizer`: deterministic, no model; ``method`` is one of :data:`METHODS`.

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
    if value is not None and not isinstance(value, str):
        return value
    name = value or "extractive"
    if name not in METHODS:
        raise ConfigError(
            f"truncation.summarizer: unknown summarizer {quoted(name)}; set it to one of: {', '.join(METHODS)}"
        )
    return BuiltinSummarizer(name)


def summarize_section(section: Section, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """Summary of ``section.content`` in at most ``max_tokens`` tokens, chosen by ``section.kind``:
    plan -> :func:`plan_summary` (the ``method`` summary for a GSD plan view, data layout
    "gsd"), git -> :func:`diff_summary` (``section.data["files"]`` / ``["renames"]`` when
    present), history -> :func:`tail_summary`, tree / environment -> :func:`head_summary`,
    anything else -> ``method`` (extractive | headings)."""
    text = section.content
    kind = section.kind
    data = section.data or {}
    # Each summary is imported here, on the first section of its kind: a build that fits loads none
    # (14-16 ms; docs/CONTRIBUTING-NODES.md, "Imports deferred on purpose").
    if kind == "plan":  # either layout: the task boxes and <task> blocks come first
        from .plan import plan_summary
        return plan_summary(text, max_tokens, counter, method=method)
    if kind == "git":
        from .diff import diff_summary
        return diff_summary(text, max_tokens, counter, files=data.get("files"), renames=data.get("renames"))
    if kind == "history":
        from .headtail import tail_summary
        return tail_summary(text, max_tokens, counter)
    if kind in ("tree", "environment"):
        from .headtail import head_summary
        return head_summary(text, max_tokens, counter)
    from .markdown import summarize_text
    return summarize_text(text, max_tokens, counter, method)

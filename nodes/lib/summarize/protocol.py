"""The Summarizer interface: what the ``summarizer`` node returns and the middle strategy calls."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ...types import Section
from ..tokens import TokenCounter

#: The built-in summarizer variants (config key truncation.summarizer; summaries in markdown.py).
METHODS = ("extractive", "headings")


@runtime_checkable
class Summarizer(Protocol):
    """Anything with ``summarize(section, max_tokens, counter) -> str``.

    ``section`` is the :class:`~ctxengine.nodes.types.Section` to shorten (``content``,
    ``kind``, ``title``, ``data``, ...); ``max_tokens`` the most tokens the summary may take;
    ``counter`` the run's exact counter (``counter.count(text)``). Return the summary text: a
    summary over ``max_tokens`` is cut to fit (head kept, with a marker), one that saves
    nothing is ignored. Be deterministic and never mutate ``section``. The built-in one is
    :class:`BuiltinSummarizer`; swap in your own by replacing the ``summarizer`` node::

        from ctxengine.nodes.lib.summarize import Summarizer

        class FirstLines:
            def summarize(self, section, max_tokens, counter):
                lines = []
                for line in section.content.splitlines():
                    if counter.count("\\n".join([*lines, line])) > max_tokens:
                        break
                    lines.append(line)
                return "\\n".join(lines)

        def summarizer() -> Summarizer:  # in my_nodes.py: ctxengine build --module my_nodes.py
            return FirstLines()
    """

    def summarize(self, section: Section, max_tokens: int, counter: TokenCounter) -> str:
        """``section.content`` shortened to at most ``max_tokens`` tokens."""
        ...

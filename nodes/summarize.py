"""Summarizers without a model: the ``summarizer`` node.

``truncation.summarizer`` (extractive | headings) picks the built-in summarizer at run time, so
every build runs the graph once whatever the project sets. The node returns a
:class:`~ctxengine.nodes.lib.summarize.Summarizer` (a protocol: ``summarize(section,
max_tokens, counter) -> str``, deterministic, no model call, fits ``max_tokens`` by exact
count). Whatever the method, plan, git, history, tree and environment sections get their own
kind-specific summary (nodes/lib/summarize/). Swap in a summarizer of your own by replacing
this node (``nodes=`` in the API, ``--module`` on the CLI; see the README).
"""

from hamilton.function_modifiers import tag

from .lib.settings import TruncationSettings
from .lib import summarize as _summarize
from .lib.summarize import Summarizer


@tag(stage="summarize")
def summarizer(truncation_settings: TruncationSettings) -> Summarizer:
    """The summarizer truncation.summarizer names: extractive (frontmatter, headings, first
    paragraphs, then key sentences by score, degrading to an outline when tight) or headings
    (frontmatter, every heading and the first sentence under it)."""
    return _summarize.as_summarizer(truncation_settings.summarizer)

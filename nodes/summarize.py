"""Summarizers without a model: the ``summarizer`` node and its variants.

The driver config key ``summarizer_method`` (from ``truncation.summarizer``, see
pipeline/driver.py VARIANT_KEYS) picks the variant. It cannot be called ``summarizer``:
Hamilton replaces a node by the config value of the same name (graph.py skips any node whose
name is a config key), so the node would be the string "extractive". Each returns a :class:`Summarizer` whose
``summarize(section, max_tokens, counter) -> str`` is deterministic, calls no model and fits
``max_tokens`` by exact count. Whatever the variant, plan, git, history, tree and
environment sections get their own kind-specific summary (nodes/lib/summarize/).
"""

from __future__ import annotations

from hamilton.function_modifiers import config, tag

from .lib.summarize import Summarizer


@tag(stage="summarize")
@config.when(summarizer_method="extractive")
def summarizer__extractive() -> Summarizer:
    """The extractive summarizer: YAML frontmatter (compact), headings and the first paragraph
    under each heading, then key sentences scored on position, term weight, identifiers, paths
    and numbers, in their original order; it degrades to headings with first sentences, then
    headings only, then the first lines when the budget is tight."""
    return Summarizer("extractive")


@tag(stage="summarize")
@config.when(summarizer_method="headings")
def summarizer__headings() -> Summarizer:
    """The headings-outline summarizer: YAML frontmatter (compact), every heading and the first
    sentence under each, nothing else."""
    return Summarizer("headings")

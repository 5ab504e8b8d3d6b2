"""Summaries without a model: extractive, headings outline, plan, diff, head and tail.

Every function here is pure and deterministic (same input, same output) and returns text
that fits ``max_tokens`` by the exact count of the given :class:`TokenCounter`.

How a summary is fitted: the text is cut into units (the compact frontmatter, each heading,
each sentence of each paragraph or list item, each table row, each code line), the
units are put in priority order, and a greedy pass takes units in that order while their
*estimated* cost (``tokens.estimate_tokens``, multi-byte aware) fits an estimated
budget. The chosen units are rendered in document order and counted exactly once; when the
count is over (or far under) the limit the estimated budget is rescaled by the observed ratio
and the pass repeats (a handful of times at most). Only the output is ever counted exactly,
so a 500 KB document costs one parse plus a few counts of a budget-sized string. A summary of
a larger source uses its budget: when every unit is kept and the count is still under 85% of
the limit, the rest goes to the frontmatter as written (its first lines, ``# … N more
lines``) instead of its compact form; otherwise it lands within about one unit of the limit.

Priority orders:

* extractive: frontmatter (compact), headings (shallow levels first), the sentences of
  first paragraphs that carry fact-like ids (tickets, versions, hashes), the first sentence
  of the first paragraph under each heading, other sentences carrying such ids by score, the rest of those first paragraphs (round-robin over the
  headings), then key sentences by score. When the whole outline does not fit, the top-level
  headings come first and then the sentences by score (first sentences ranked up by
  position), deeper headings only as the sentences under them need them: when the outline
  would take more than half of the budget. The score mixes position, term weight
  (tf-idf over the document's sentences), identifiers (CamelCase, snake_case, ``code``),
  paths (a/b.py, foo.md) and numbers. When even the top-level headings do not fit, the
  summary is the first lines of the document. Fenced code is kept line by line: the first
  line of each block with the first sentences, then every definition line (def, class,
  function, export, interface, type, struct, fn, func, impl ...), then the other lines from
  the top of each block, merged with the key sentences so that prose and code are kept in
  proportion; fences stay closed and ``⋮ N lines left out`` marks each gap.
* headings: frontmatter, headings, the first sentence under each heading.
* plan (article plan.md, the GSD plan section, a GSD PLAN.md), whole lines only: the task
  count line, then the skeleton of the work left: every open task's name (in-progress and
  pending task lines, GSD <name>, ``Task N:`` headings, the objective's first line), then every <files>, <verify>,
  <done> (Files/Verify/Done lines); then the frontmatter, the current task's details (the
  in-progress task, or a PLAN.md's first <task>), other prose, the other tasks' details,
  done task lines; the other code lines; @ lines and the lines of <context> blocks last. Code is kept
  line by line as in documents (code.py): a block's first line and definition lines with
  its task's details, the other lines from the top of each block with the blocks in step,
  fences closed and ``⋮ N lines left out`` for each gap. Code blocks are read by
  nodes/lib/fences.py: one left open ends at its element's closing tag (</action>). Task boxes are read
  by nodes/lib/plan.py (one parser for the plan stage and this summary).
* diff: a total line and one ``<status> <path> +n/-m`` line per file.

The package gives the interface and the dispatch; each summary is imported from its module
(``from ctxengine.nodes.lib.summarize.markdown import extractive_summary``). The dispatch
imports a kind's summary when it first summarizes a section of that kind, so a build that fits
its budget loads none of them (docs/CONTRIBUTING-NODES.md, "Imports deferred on purpose").
"""

from __future__ import annotations

from .protocol import METHODS, Summarizer
from .dispatch import BuiltinSummarizer, as_summarizer, summarize_section

__all__ = ["METHODS", "Summarizer", "BuiltinSummarizer", "as_summarizer", "summarize_section"]

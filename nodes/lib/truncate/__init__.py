"""Pure truncation algorithms, a module per concern:

* measure: estimates and the process-wide count cache (CachedCounter)
* pools: pool shares, use, loans and debts (each formula once)
* units: tool-call groups and trimming units to a budget
* textcut: cutting text at paragraph or line boundaries, with a marker
* history_fit: fitting a session history by whole rounds
* summaries: round summary lines that keep their ids
* strategy: tail / head / middle as frozen values
* engine: the truncation state, the steps, the refill and the table of steps

Nothing here is a node and nothing reads files; ``from ctxengine.nodes.lib import truncate as T``
sees every public name.
"""

from dataclasses import replace  # noqa: F401  (callers use T.replace)

from ..lazy import lazy_exports

# Each module loads when one of its names is first used: the summaries of rounds (summaries.py,
# which pulls in the summary scoring) only when something is cut.
__getattr__, __dir__ = lazy_exports(globals(), {
    "measure": ("*",),
    "pools": ("*",),
    "units": ("*",),
    "textcut": ("*",),
    "history_fit": ("*", "_Forms"),  # (tests build forms directly)
    "strategy": ("*",),
    "engine": ("*", "_with_change"),
    "summaries": ("*", "_id_spans"),
})

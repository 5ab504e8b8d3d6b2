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

from .measure import *  # noqa: F401,F403
from .pools import *  # noqa: F401,F403
from .units import *  # noqa: F401,F403
from .textcut import *  # noqa: F401,F403
from .history_fit import *  # noqa: F401,F403
from .history_fit import _Forms  # noqa: F401  (tests build forms directly)
from .strategy import *  # noqa: F401,F403
from .engine import *  # noqa: F401,F403
from .engine import _with_change  # noqa: F401
from .summaries import *  # noqa: F401,F403
from .summaries import _id_spans  # noqa: F401

"""How ctxengine reuses results between builds: one package, one concern a module.

- :mod:`.folders`: where the cache lives (one folder per project under the root of
  :func:`ctxengine.nodes.lib.usercache.cache_root`), what of it is ctxengine's (``CACHEDIR.TAG``),
  the code version, stats, clearing, the bound of the whole root;
- :mod:`.store`: a folder's SQLite result store beside Hamilton's metadata (one transaction a
  build, rows checked by the user's HMAC), the memory layer of a warm process, lazy hits,
  shared chunks, the bound of one folder;
- :mod:`.fingerprints`: the data versions of values, from content digests set when values are made;
- :mod:`.adapter`: the thin Hamilton cache adapter and what a run did (hits, misses).

The memo of values made from content (:mod:`ctxengine.nodes.lib.memo`) writes its table in the
same database, in the build's transaction. The table in docs/CONTRIBUTING-NODES.md ("How results
are reused") lists every layer with its key and what invalidates it.
"""

from __future__ import annotations

from .adapter import CacheAdapter, RunSummary, after_run, new_adapter
from .fingerprints import fingerprint
from .folders import (DATABASE, DEFAULT_MAX_BYTES, PROJECTS, all_cache_dirs, cache_root, checked_project_cache_dir, clear,
                      code_folders, code_version, project_cache_dir, stale, stats, store_dir, total_bytes)
from .store import MEMORY, SQLITE_TIMEOUT, StaleResult, materialize, prune, stores_for, using

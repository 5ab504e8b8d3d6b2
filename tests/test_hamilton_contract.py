"""The contract with Hamilton's cache: what ctxengine.caching relies on beyond Hamilton's public
API. It fails loudly, naming what to re-check, when the installed Hamilton is outside the range
checked (pyproject pins ``apache-hamilton>=1.89,<1.91``) or a member relied on changed.

To upgrade Hamilton: read the new version's hamilton/caching/adapter.py and stores/sqlite.py
for each member below (how it is called, what it returns), adjust pipeline/caching/adapter.py
and store.py, then widen CHECKED and the pin together."""

from __future__ import annotations

import inspect

from hamilton.caching.adapter import HamiltonCacheAdapter
from hamilton.caching.stores.sqlite import SQLiteMetadataStore

from ctxengine.caching.adapter import CacheAdapter
from ctxengine.caching.store import SQLiteResultStore, _MetadataStore

#: The Hamilton versions (major, minor) this contract was checked against.
CHECKED = {(1, 89), (1, 90)}

#: Private members of Hamilton's classes that ctxengine overrides, with Hamilton's signature
#: (goal of issue 21: at most 2). What it is for: _version_data fingerprints values with
#: ctxengine.caching.fingerprints (inputs, overrides and computed results go through it).
OVERRIDDEN = {
    (HamiltonCacheAdapter, "_version_data"): "(self, node_name: str, run_id: str, result: Any, task_id: str | None = None) -> str",
}

#: Private members ctxengine calls or reads (not overrides): they must still exist, with these signatures.
CALLED = {
    (HamiltonCacheAdapter, "_execute_node"): "(self, run_id: str, node_name: str, node_callable: collections.abc.Callable, "
                                             "node_kwargs: dict[str, typing.Any], task_id: str | None = None) -> Any",
    (HamiltonCacheAdapter, "_log_event"): "(self, run_id: str, node_name: str, actor: Literal['adapter', "
                                          "'metadata_store', 'result_store'], event_type: hamilton.caching.adapter."
                                          "CachingEventType, msg: str | None = None, value: typing.Any | None = None, "
                                          "task_id: str | None = None) -> None",
    (HamiltonCacheAdapter, "_resolve_default_parameter_values"): "(node_: hamilton.node.Node, node_kwargs: "
                                                                 "dict[str, typing.Any]) -> dict[str, typing.Any]",
}
#: Per-run tables of Hamilton's adapter that CacheAdapter.forget_runs trims (dicts keyed by run id).
RUN_TABLES = ("_fn_graphs", "_data_savers", "_data_loaders", "_logs")


def _installed() -> tuple[int, int]:
    from hamilton import version

    return tuple(version.VERSION[:2])


def test_hamilton_is_a_version_this_contract_was_checked_with():
    assert _installed() in CHECKED, (
        f"apache-hamilton {'.'.join(map(str, _installed()))} is installed, but ctxengine.caching was checked "
        f"with {sorted(CHECKED)} only: re-check {sorted(n for _, n in OVERRIDDEN)} (overridden) and "
        f"{sorted(n for _, n in CALLED)} + {list(RUN_TABLES)} (used) in hamilton/caching/adapter.py, "
        "then widen CHECKED and the pin in pyproject.toml")


def test_the_private_members_overridden_are_the_ones_declared_with_hamiltons_signature():
    ours = {(base, name) for cls, base in ((CacheAdapter, HamiltonCacheAdapter), (_MetadataStore, SQLiteMetadataStore),
                                           (SQLiteResultStore, SQLiteResultStore.__mro__[1]))
            for name in vars(cls) if name.startswith("_") and not name.startswith("__")
            and name != "_abc_impl" and hasattr(base, name)}  # _abc_impl: set by ABCMeta on every subclass
    assert ours == set(OVERRIDDEN), (
        f"ctxengine.caching overrides the private Hamilton members {sorted(n for _, n in ours)}, the contract "
        f"declares {sorted(n for _, n in OVERRIDDEN)}: declare a new one here (and keep them at most 2)")
    assert len(OVERRIDDEN) <= 2
    for (cls, name), expected in OVERRIDDEN.items():
        found = str(inspect.signature(getattr(cls, name)))
        assert found == expected, (f"Hamilton's {cls.__name__}.{name} changed: {found} (was {expected}); "
                                   f"re-check ctxengine.caching's override of it")


def test_the_private_members_used_still_exist_with_their_signatures(tmp_path):
    for (cls, name), expected in CALLED.items():
        assert hasattr(cls, name), f"Hamilton's {cls.__name__}.{name} is gone; ctxengine.caching.adapter calls it"
        found = str(inspect.signature(getattr(cls, name)))
        assert found == expected, f"Hamilton's {cls.__name__}.{name} changed: {found} (was {expected}); re-check its callers"
    adapter = CacheAdapter(path=str(tmp_path), metadata_store=object(), result_store=object())
    for name in RUN_TABLES:
        assert isinstance(getattr(adapter, name, None), dict), (
            f"Hamilton's adapter has no per-run table {name}; re-check CacheAdapter.forget_runs")
    assert "connection_kwargs" in inspect.signature(SQLiteMetadataStore.__init__).parameters, (
        "SQLiteMetadataStore takes no connection_kwargs; re-check _MetadataStore (the connection factory)")

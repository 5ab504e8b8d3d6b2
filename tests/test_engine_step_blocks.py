"""The pieces of a truncation step (nodes/lib/truncate/engine.py ``_step``), one table each: each
candidate's part of the room, and one pass of a step's action over the candidates."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.truncate import engine as E  # noqa: E402
from ctxengine.nodes.types import Section  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def section(key: str, priority: int = 60, pool: str = "references") -> Section:
    return Section(key, key.title(), "reference", "text", priority, pool)


def state(tokens: dict[str, int], target: int, priorities: dict[str, int] | None = None) -> E.TruncationState:
    sections = [section(k, (priorities or {}).get(k, 60)) for k in tokens]
    return E.start_state(sections, tokens, tokens, 0, target, target, {"references": target}, {})


def shrink(st: E.TruncationState, sec, room: int) -> E.TruncationState:
    """An action that takes exactly ``room`` tokens from the section (and records whom it asked)."""
    tokens = dict(st.tokens)
    tokens[sec.key] -= room
    return replace(st, tokens=tokens, ledger=st.ledger + ((sec.key, room),))


@pytest.mark.parametrize("tokens, split, expected", [
    case("split by size between two of one priority", {"a": 300, "b": 100}, True, {"a": 150, "b": 50}),
    case("not split: each may take the whole room", {"a": 300, "b": 100}, False, {}),
    case("a single candidate: the whole room", {"a": 300}, True, {}),
])
def test_parts(tokens, split, expected):
    st = state(tokens, sum(tokens.values()) - 200)
    candidates = [s for s in st.sections]
    assert E._parts(st, candidates, "all", split) == expected


@pytest.mark.parametrize("tokens, target, parts, expected", [
    case("each given its part", {"a": 300, "b": 100}, 200, {"a": 150, "b": 50}, [("a", 150), ("b", 50)]),
    case("no parts: the first takes the whole room, the next nothing left", {"a": 300, "b": 100}, 200, {},
         [("a", 200)]),
    case("a part larger than the room is capped by the room", {"a": 300}, 250, {"a": 500}, [("a", 50)]),
    case("already within the target: nothing asked", {"a": 300}, 300, {}, []),
])
def test_pass(tokens, target, parts, expected):
    st = state(tokens, target)
    done = E._pass(st, list(st.sections), "all", shrink, parts)
    assert list(done.ledger) == expected


def test_pass_skips_a_candidate_gone_meanwhile():
    st = state({"a": 300, "b": 100}, 200)
    gone = replace(st, sections=st.sections[:1])  # b dropped by an earlier action
    done = E._pass(gone, list(st.sections), "all", shrink, {"a": 100, "b": 100})
    assert list(done.ledger) == [("a", 100)]

"""The steps parse_jsonl (the JSON Lines session.log) is made of, one table each: the tool calls
of a line, the rounds the messages group into, tool results moved into their call's round, and
the results whose call is nowhere in the log. A change to one step shows which reading moved."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.sessions import jsonl as J  # noqa: E402
from ctxengine.nodes.types import Message  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def m(role: str, line: int, calls: tuple[str, ...] = (), call_id: str | None = None) -> Message:
    """A message at a line, with tool calls of those ids, or answering the call ``call_id``."""
    return Message(role, f"{role}{line}", 0, line, tuple({"id": c, "name": "t", "arguments": ""} for c in calls),
                   call_id)


@pytest.mark.parametrize("raw, expected_ids, warnings", [
    case("ids kept, missing ones numbered", [{"id": "a"}, {"name": "x"}], ("a", "L7.2"), []),
    case("call_id when no id", [{"call_id": "c"}], ("c",), []),
    case("not a list", {"id": "a"}, (), ["s.log:7: 'tool_calls' must be a list; calls ignored"]),
    case("a call not an object", [3, {"id": "b"}], ("b",), ["s.log:7: a tool call that is not an object was ignored"]),
])
def test_tool_calls_of(raw, expected_ids, warnings):
    found: list[str] = []
    calls = J._tool_calls_of(raw, "s.log", 7, found)
    assert (tuple(call["id"] for call in calls), found) == (expected_ids, warnings)


@pytest.mark.parametrize("read, expected", [
    case("a round at each user message", [(None, m("user", 1)), (None, m("assistant", 2)), (None, m("user", 3))],
         [[1, 2], [3]]),
    case("a system prompt joins the first request", [(None, m("system", 1)), (None, m("user", 2)),
                                                     (None, m("assistant", 3))], [[1, 2, 3]]),
    case("round values group, whatever the roles", [(1, m("user", 1)), (1, m("user", 2)), (2, m("assistant", 3))],
         [[1, 2], [3]]),
    case("a round value after a lead-in starts its own round", [(None, m("system", 1)), (5, m("user", 2))],
         [[1], [2]]),
    case("no value after a valued round: stays in it", [(1, m("user", 1)), (None, m("assistant", 2))], [[1, 2]]),
    case("an answer first is a round of its own", [(None, m("assistant", 1)), (None, m("assistant", 2))], [[1, 2]]),
])
def test_round_groups(read, expected):
    assert [[message.line for message in group] for group in J._round_groups(read)] == expected


@pytest.mark.parametrize("groups, expected", [
    case("a result follows its call back", [[m("assistant", 1, ("a",))], [m("user", 2), m("tool", 3, call_id="a")]],
         [[1, 3], [2]]),
    case("a result before its call stays", [[m("tool", 1, call_id="a")], [m("assistant", 2, ("a",))]], [[1], [2]]),
    case("the first round of a call id owns it", [[m("assistant", 1, ("a",))], [m("assistant", 2, ("a",))],
                                                  [m("tool", 3, call_id="a")]], [[1, 3], [2], []]),
    case("an unknown call stays", [[m("user", 1)], [m("tool", 2, call_id="z")]], [[1], [2]]),
])
def test_results_with_their_calls(groups, expected):
    assert [[message.line for message in group] for group in J._results_with_their_calls(groups)] == expected


def test_orphan_result_warnings_name_the_line_and_the_call():
    groups = [[m("assistant", 1, ("a",)), m("tool", 2, call_id="a")], [m("tool", 4, call_id="b"), m("tool", 5)]]
    assert J._orphan_result_warnings(groups, "s.log") == [
        "s.log:4: tool result for call 'b' has no matching tool call"]

"""The pieces of a round rendered verbatim (nodes/lib/sessions/render.py), one table each: the
heading, which messages answer a call, the results under each call, a message's lines, a call's lines."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.sessions import render as R
from ctxengine.nodes.types import Message, Round


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def call(id_, name="Bash", arguments="ls"):
    return {"id": id_, "name": name, "arguments": arguments}


def tool(content: str, call_id: str | None) -> Message:
    return Message("tool", content, 1, call_id=call_id)


@pytest.mark.parametrize("round_, expected", [
    case("with its transcript lines", Round(3, (), (10, 42)), "### Round 3 · lines 10-42"),
    case("lines unknown", Round(7, ()), "### Round 7"),
])
def test_round_heading(round_, expected):
    assert R.round_heading(round_) == expected


@pytest.mark.parametrize("messages, expected", [
    case("ids as text, a missing id as 'None'",
         [Message("assistant", "", 1, tool_calls=(call("a"), call(7), {"name": "x"}))], {"a", "7", "None"}),
    case("no calls", [Message("user", "hi", 1)], set()),
])
def test_call_ids_of(messages, expected):
    assert R.call_ids_of(messages) == expected


@pytest.mark.parametrize("messages, call_ids, expected", [
    case("two results of one call keep their order, an orphan is left out",
         [tool("1", "a"), tool("orphan", "z"), tool("2", "a")], {"a"}, {"a": ["1", "2"]}),
    case("tool output without a call id answers nothing", [tool("x", None)], {"a"}, {}),
    case("a user message with the id is not a result", [Message("user", "x", 1, call_id="a")], {"a"}, {}),
    case("no calls: nothing (an aider round)", [tool("x", "a")], set(), {}),
])
def test_results_by_call(messages, call_ids, expected):
    assert {k: [m.content for m in v] for k, v in R.results_by_call(messages, call_ids).items()} == expected


@pytest.mark.parametrize("message, results, expected", [
    case("a session note", Message("system", "resumed", 1), {}, ["[session] resumed"]),
    case("tool output with its call id", tool("out", "q"), {}, ["[tool output q]", "out"]),
    case("tool output without one", tool("out", None), {}, ["[tool output]", "out"]),
    case("words under the role", Message("user", "Fix it", 1), {}, ["[user]", "Fix it"]),
    case("no words, only a call without a result", Message("assistant", "", 1, tool_calls=(call("a"),)), {},
         ["[tool call a] Bash: ls", "[tool result a] (no result recorded)"]),
    case("words, then the call and its result",
         Message("assistant", "Looking", 1, tool_calls=(call("a"),)), {"a": [tool("x\ny", "a")]},
         ["[assistant]", "Looking", "[tool call a] Bash: ls", "[tool result a]", "    x\n    y"]),
])
def test_message_lines(message, results, expected):
    assert R.message_lines(message, results) == expected


@pytest.mark.parametrize("call_, results, expected", [
    case("name and arguments missing", {"id": "a"}, {}, ["[tool call a] tool: ", "[tool result a] (no result recorded)"]),
    case("an empty result", call("a"), {"a": [tool("", "a")]}, ["[tool call a] Bash: ls", "[tool result a]", "    (empty)"]),
    case("two results, blank lines not indented", call("a", "Read", "f"), {"a": [tool("1\n\n2", "a"), tool("3", "a")]},
         ["[tool call a] Read: f", "[tool result a]", "    1\n\n    2", "[tool result a]", "    3"]),
])
def test_call_lines(call_, results, expected):
    assert R.call_lines(call_, results) == expected


def test_render_round_puts_each_result_under_its_call_and_the_rest_in_order():
    round_ = Round(2, (Message("user", "Go", 1), tool("early", "a"),
                       Message("assistant", "", 1, tool_calls=(call("a"),)), tool("stray", "b")), (5, 9))
    assert R.render_round(round_) == "\n".join([
        "### Round 2 · lines 5-9", "[user]", "Go", "[tool call a] Bash: ls", "[tool result a]", "    early",
        "[tool output b]", "stray"])

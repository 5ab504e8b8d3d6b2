"""The steps the Claude Code rounds are made of (nodes/lib/sessions/claude_code/rounds.py), one
table each: the active chain and the branches off it (the thread), the call a subagent's chain
names or ran under, and the notes of the caps and of results without their call."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.sessions.claude_code import rounds as R  # noqa: E402
from ctxengine.nodes.lib.sessions.claude_code import events as E_  # noqa: E402
from ctxengine.nodes.lib.sessions.claude_code.events import Event, Options, Read, prompt_key  # noqa: E402
from ctxengine.nodes.types import Message, Round  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


# a -> b -> c is the active chain; d forks off b, e follows d; x hangs off an unknown parent
PARENTS = {"a": None, "b": "a", "c": "b", "d": "b", "e": "d", "x": "gone", "l1": "l2", "l2": "l1"}


@pytest.mark.parametrize("last, expected", [
    case("up to the root", "c", {"a", "b", "c"}),
    case("a loop stops", "l1", {"l1", "l2"}),
    case("nothing", None, set()),
])
def test_active_chain(last, expected):
    assert R._active_chain(last, PARENTS) == expected


@pytest.mark.parametrize("uuids, expected", [
    case("a branch off the chain: its first event", ["a", "b", "d", "e", "c"], {"d": "d", "e": "d"}),
    case("detached from the chain: None, up to its unknown parent", ["a", "x"], {"x": None, "gone": None}),
    case("the later event first, same root", ["e", "d"], {"e": "d", "d": "d"}),
])
def test_branch_roots(uuids, expected):
    main = [Event(i, "assistant", uuid) for i, uuid in enumerate(uuids, 1)]
    assert R._branch_roots(main, {"a", "b", "c"}, PARENTS) == expected


def test_thread_leaves_out_a_rewound_branch_with_a_prompt():
    events = [Event(1, "prompt", "a"), Event(2, "assistant", "b"), Event(3, "prompt", "d"), Event(4, "assistant", "e"),
              Event(5, "prompt", "c")]
    assert R._thread(Read(events, dict(PARENTS))) == {3, 4}


def builder_with_calls() -> R._Builder:
    builder = R._Builder(Options())
    task = {"id": "t1", "name": "Task", "arguments": ""}
    builder.groups = [[Message("assistant", "", 0, 1, (task, {"id": "t2", "name": "Task", "arguments": ""}))]]
    builder.calls = {"t1": (0, "10:00"), "t2": (0, "10:05")}
    builder.results = {"t1": "10:04"}
    builder.agents = {"ag": "t2"}
    builder.prompts = {"t1": prompt_key("Find the bug"), "t2": prompt_key("Write docs")}
    return builder


@pytest.mark.parametrize("events, taken, expected", [
    case("by agentId", [Event(7, "prompt", "r", True, agent_id="ag", text="Find the bug")], set(), "t2"),
    case("by its opening prompt", [Event(7, "prompt", "r", True, text="Find the bug")], set(), "t1"),
    case("a call taken is not named twice", [Event(7, "prompt", "r", True, text="Find the bug")], {"t1"}, None),
    case("no prompt opens it", [Event(7, "assistant", "r", True, text="Find the bug")], set(), None),
])
def test_named_call(events, taken, expected):
    builder = builder_with_calls()
    by_prompt = {key: [call] for call, key in builder.prompts.items()}
    assert R._named_call("r", events, builder, by_prompt, taken) == expected


@pytest.mark.parametrize("timestamps, taken, expected", [
    case("the first call running then", ["10:01"], set(), "t1"),
    case("after the first ended: the second", ["10:06"], set(), "t2"),
    case("every running call taken: the first anyway", ["10:06"], {"t2"}, "t2"),
    case("before any call", ["09:00"], set(), None),
    case("no timestamp", [""], set(), None),
])
def test_timed_call(timestamps, taken, expected):
    events = [Event(7, "assistant", f"s{i}", True, timestamp) for i, timestamp in enumerate(timestamps)]
    assert R._timed_call(events, builder_with_calls(), taken) == expected


def test_cap_notes_and_results_without_their_call():
    rounds = [Round(3, (Message("user", "q", 3, 40), Message("tool", "r", 3, 41, call_id="gone")), (40, 41))]
    read = Read(skipped=30, foreign=1)
    assert R._cap_notes(read, "t.jsonl", 5, rounds, 2)[1:] == [
        R.rounds_cap_warning("t.jsonl", 5, 40), "t.jsonl: 1 line recorded in another folder (not this project) skipped"]
    assert R._orphan_result_warnings(rounds, "t.jsonl") == [
        "t.jsonl:41: tool result for call 'gone' has no matching tool call in the thread "
        "(the transcript starts after it)"]


@pytest.mark.parametrize("block, expected_call, expected_task", [
    case("a call with its id, input as sorted JSON", {"id": "t", "name": "Bash", "input": {"b": 1, "a": "x"}},
         {"id": "t", "name": "Bash", "arguments": '{"a": "x", "b": 1}'}, ()),
    case("no id, no name", {"input": {}}, {"id": "L9.2", "name": "tool", "arguments": "{}"}, ()),
    case("a subagent call with a prompt is a task", {"id": "s", "name": "Task", "input": {"prompt": " Go "}},
         {"id": "s", "name": "Task", "arguments": '{"prompt": " Go "}'}, (("s", prompt_key("Go")),)),
    case("a prompt of another tool is none", {"id": "o", "name": "Bash", "input": {"prompt": "Go"}},
         {"id": "o", "name": "Bash", "arguments": '{"prompt": "Go"}'}, ()),
])
def test_tool_call(block, expected_call, expected_task):
    assert E_._tool_call(block, "L9.2", Options()) == (expected_call, expected_task)

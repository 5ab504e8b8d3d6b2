"""The steps a round is trimmed inside by (nodes/lib/truncate/history_fit.py
``_messages_within``), one table each: the parts and their classes, the shares given class by
class, the tool groups lost and given back whole, and the messages kept. Real token counts."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.tokens import token_counter_for
from ctxengine.nodes.lib.truncate import history_fit as hf
from ctxengine.nodes.types import Message

COUNTER = token_counter_for("cl100k_base")
CALL = {"id": "c1", "name": "Bash", "arguments": "ls -la"}
MESSAGES = (Message("assistant", "I will look.", 1, 2, (CALL,)), Message("tool", "a\nb\nc", 1, 3, call_id="c1"),
            Message("assistant", "", 1, 4), Message("assistant", "Done.", 1, 5))


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def test_part_keys_split_own_text_from_tool_parts():
    assert hf._part_keys(MESSAGES) == ([(0, "content"), (3, "content")], [(1, "content"), (0, ("call", 0))])


@pytest.mark.parametrize("sizes, space, expected", [
    case("all fit", [5, 7], 20, [5, 7, 4, 4]),
    case("own text first, tools share what is left", [5, 7], 14, [5, 7, 1, 1]),
    case("tools get nothing when own text is over", [30, 30], 40, [20, 20, 0, 0]),
    case("each class shared by size: small parts whole", [3, 50], 30, [3, 27, 0, 0]),
])
def test_given_shares(sizes, space, expected):
    own, tool = [(0, "content"), (3, "content")], [(1, "content"), (0, ("call", 0))]
    given = hf._given_shares((own, tool), dict(zip(own + tool, sizes + [4, 4])), space)
    assert [given[key] for key in own + tool] == expected


def parts() -> hf._Parts:
    sizes = {(1, "content"): 9, (0, ("call", 0)): 6}
    return hf._Parts(MESSAGES, COUNTER, None, {(0, "content"), (3, "content")}, sizes)


@pytest.mark.parametrize("kept, slack, expected_kept, expected_slack", [
    case("a lost group back whole when it fits", {(1, "content"): None, (0, ("call", 0)): "ls -la"}, 20,
         {(1, "content"): "a\nb\nc", (0, ("call", 0)): "ls -la"}, 5),
    case("not when it does not", {(1, "content"): None, (0, ("call", 0)): "ls -la"}, 14,
         {(1, "content"): None, (0, ("call", 0)): "ls -la"}, 14),
])
def test_with_lost_groups_back(kept, slack, expected_kept, expected_slack):
    tool = [(1, "content"), (0, ("call", 0))]
    groups = [0, 0, 1, 2]
    lost = hf._lost_groups(kept, tool, groups)
    assert lost == {0}
    assert hf._with_lost_groups_back(kept, lost, tool, groups, parts(), slack) == expected_slack
    assert kept == expected_kept


@pytest.mark.parametrize("kept, lost, expected", [
    case("all kept; an empty message goes", {(0, "content"): "I will look.", (3, "content"): "Done.",
                                             (1, "content"): "a\nb\nc", (0, ("call", 0)): "ls -la"}, set(),
         [(0, "I will look.", 1), (1, "a\nb\nc", 0), (3, "Done.", 0)]),
    case("a lost group: the result goes, the call's message keeps its text",
         {(0, "content"): "I will", (3, "content"): None, (1, "content"): None, (0, ("call", 0)): "ls"}, {0},
         [(0, "I will", 0)]),
])
def test_kept_messages(kept, lost, expected):
    out = hf._kept_messages(MESSAGES, kept, [0, 0, 1, 2], lost)
    assert [(i, m.content, len(m.tool_calls)) for i, m in out] == expected


# round_within's steps: the round's three runs, then the search for the space that fits the room.

def _user(text: str = "Do it") -> Message:
    return Message("user", text, 1)


@pytest.mark.parametrize("messages, tail_start, expected", [
    case("no tail: the opening, then the rest", (_user(), MESSAGES[0], MESSAGES[1]), None, (1, 2, 0)),
    case("a tail from index 2", (_user(), MESSAGES[0], MESSAGES[1], MESSAGES[3]), 2, (1, 1, 2)),
    case("a tail inside the opening starts after it", (MESSAGES[2], _user(), MESSAGES[0]), 0, (2, 0, 1)),
    case("a tail past the end is empty", (_user(), MESSAGES[0]), 9, (1, 1, 0)),
])
def test_round_thirds(messages, tail_start, expected):
    thirds = hf.round_thirds(messages, tail_start)
    assert tuple(map(len, thirds)) == expected
    assert thirds.head + thirds.rest + thirds.tail == messages[:sum(expected)]


def _trim(tokens: int) -> hf._Trimmed:
    return hf._Trimmed(str(tokens), tokens, None)


@pytest.mark.parametrize("best, tokens, room, expected", [
    case("none yet, within", None, 90, 100, 90),
    case("none yet, over", None, 110, 100, None),
    case("larger and within replaces", 80, 95, 100, 95),
    case("smaller keeps the best", 80, 70, 100, 80),
    case("exactly the room is within", 80, 100, 100, 100),
])
def test_larger_within(best, tokens, room, expected):
    found = hf._larger_within(None if best is None else _trim(best), _trim(tokens), room)
    assert (None if found is None else found.tokens) == expected


@pytest.mark.parametrize("space, miss, fits, over, expected", [
    case("no bracket yet: step by the miss", 100, -30, 0, None, 70),
    case("inside the bracket: step by the miss", 100, 5, 50, 120, 105),
    case("outside it: its middle", 100, 40, 50, 120, 85),
    case("on its edge is outside", 100, 20, 50, 120, 85),
])
def test_next_space(space, miss, fits, over, expected):
    assert hf._next_space(space, miss, fits, over) == expected


@pytest.mark.parametrize("render_cost, room, space, expected, tries", [
    case("the first try close enough", lambda s: s + 5, 500, 495, 500, 1),
    case("the render costs a fifth more: steps by the miss, then inside the bracket", lambda s: s * 6 // 5, 300, 300,
         300, 4),  # 300 -> 360 over, 240 -> 288 (12 short), 252 -> 302 over, 250 -> 300
    case("nothing fits: bisects down to the smallest made", lambda s: 400 + s, 300, 100, 401, 7),  # 100, 50, ... 1
    case("no space to give: one try", lambda s: 50, 40, -10, 50, 1),
])
def test_closest_trim(render_cost, room, space, expected, tries):
    asked = []

    def trimmed_to(space):
        asked.append(space)
        return _trim(render_cost(max(0, space)))

    assert hf._closest_trim(trimmed_to, room, space).tokens == expected
    assert len(asked) == tries


def _forms():
    from ctxengine.nodes.lib.sessions import render_round, round_summary
    from ctxengine.nodes.types import Round

    long = Round(1, (_user("Fix the parser"),) + tuple(Message("assistant", f"Step {n}: " + "word " * 60, 1) for n in range(4)))
    short = Round(2, (_user("ok"),))
    return hf._Forms((long, short), render_round, round_summary)


@pytest.mark.parametrize("levels, i, expected", [
    case("first-last, shorter than the whole: may grow", [hf.FIRST_LAST, hf.VERBATIM], 0, True),
    case("a summary line: may grow", [hf.SUMMARY, hf.VERBATIM], 0, True),
    case("verbatim already", [hf.VERBATIM, hf.VERBATIM], 0, False),
    case("dropped: not given back", [hf.DROPPED, hf.VERBATIM], 0, False),
    case("a round whose short form is its whole", [hf.VERBATIM, hf.FIRST_LAST], 1, False),
])
def test_may_grow(levels, i, expected):
    assert hf._may_grow(_forms(), levels, i) is expected


def test_newest_within_cuts_the_request_when_the_opening_alone_is_over():
    from ctxengine.nodes.lib.sessions import render_round
    from ctxengine.nodes.types import Round

    round_ = Round(4, (Message("system", "resumed", 1), _user("word " * 400), Message("assistant", "Done " * 50, 1)))
    text, kept = hf._newest_within(round_, 60, COUNTER, render_round, 4.0)
    assert [m.role for m in kept.messages] == ["system", "user"]  # the reply went, a note names it
    assert kept.messages[1].content.startswith("word word") and len(kept.messages[1].content) < 400 * 5
    assert "[session] resumed" in text and COUNTER.count(text) <= 60 + 24


@pytest.mark.parametrize("room", [0, 100])
def test_newest_within_a_round_without_messages_is_its_heading(room):
    from ctxengine.nodes.lib.sessions import render_round
    from ctxengine.nodes.types import Round

    assert hf._newest_within(Round(1, ()), room, COUNTER, render_round, 4.0)[0] == "### Round 1"


@pytest.mark.parametrize("target, floor, expected", [
    case("room for all: verbatim", 10_000, 0, [hf.VERBATIM, hf.VERBATIM]),
    case("a round the state stage summarised stays a summary line", 10_000, 1, [hf.SUMMARY, hf.VERBATIM]),
    case("tight: the older round goes down first", 60, 0, [hf.SUMMARY, hf.VERBATIM]),
])
def test_floored_levels(target, floor, expected):
    forms = _forms()
    tokens_of = hf._PartTokens(forms, COUNTER)
    levels, total = hf._floored_levels(forms, tokens_of, target, 1, 0.75, 10, floor)
    assert levels == expected and total <= target

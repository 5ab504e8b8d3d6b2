"""The steps of aider's transcript parse (nodes/lib/sessions/aider.py), one table each."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.sessions import aider as A


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.mark.parametrize("kind, block, expected", [
    case("a user line", "user", "#### fix it", ("user", "fix it")),
    case("a user run: each prefix cut, aider's trailing spaces left out", "user", "#### one  \n#### two",
         ("user", "one\ntwo")),
    case("a tab after the prefix", "user", "####\tindented", ("user", "indented")),
    case("replayed confirmation answers are tool output", "user",
         "#### Allow edits? (Y)es/(N)o [Yes]: y\n#### Create b.py? (Y)es/(N)o/(A)ll [Yes]: n",
         ("tool", "Allow edits? (Y)es/(N)o [Yes]: y\nCreate b.py? (Y)es/(N)o/(A)ll [Yes]: n")),
    case("a request that quotes the options stays a request", "user", "#### why ask (Y)es/(N)o?",
         ("user", "why ask (Y)es/(N)o?")),
    case("tool output, with and without the space", "tool", "> Applied edit to a.py\n>b", ("tool", "Applied edit to a.py\nb")),
    case("trailing blank tool lines go", "tool", "> x\n> \n>", ("tool", "x")),
])
def test_run_body(kind, block, expected):
    assert A.run_body(kind, block) == expected


@pytest.mark.parametrize("text, starts, skipped, warned", [
    case("no request", "banner\n", [], 0, False),
    case("two requests after a banner", "banner\n#### a\nok\n#### b\n", [7, 17], 0, False),
    case("over the cap: the newest kept, a warning", "#### r\nok\n" * (A.MAX_ROUNDS + 2), None, 2, True),
])
def test_fresh_start(text, starts, skipped, warned):
    start = A._fresh_start(text, "h.md")
    assert (start.skipped, bool(start.warnings), start.cursors, start.rounds, start.kept) == (skipped, warned, [], [], ())
    assert start.starts == (starts if starts is not None else start.starts) and len(start.starts) <= A.MAX_ROUNDS


def test_resumed_start_without_a_last_parse_is_none():
    assert A._resumed_start("#### a\n", None) is None

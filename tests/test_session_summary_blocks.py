"""The steps of a round's summary bullet (nodes/lib/sessions/summary.py), one table each: what
was done, the files touched (edited first, then mentioned, repeats left out), the calls ran."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.sessions import summary as S
from ctxengine.nodes.types import Message, Round


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def m(role: str, content: str, *args: str) -> Message:
    calls = tuple({"id": f"c{i}", "name": "Edit", "arguments": a} for i, a in enumerate(args))
    return Message(role, content, 1, 1, calls)


@pytest.mark.parametrize("messages, expected", [
    case("aider's commits: two, then how many more",
         [m("tool", "x\nCommit abcdef123 Fix a\nCommit 1234567 Fix b\nCommit 7654321 Fix c")],
         "commit abcdef1 Fix a; commit 1234567 Fix b (+1 more commits)"),
    case("else the assistant's last words", [m("assistant", "First. More."), m("assistant", "Done it. Then.")],
         "Done it."),
    case("nothing", [m("user", "Do it")], ""),
])
def test_done_text(messages, expected):
    assert S._done_text(messages) == expected


@pytest.mark.parametrize("message, expected", [
    case("a tool's applied edits", m("tool", "Applied edit to src/a.py.\nWrote b.txt"), ["src/a.py", "b.txt"]),
    case("SEARCH/REPLACE headers",
         m("assistant", "src/c.py\n```python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```"), ["src/c.py"]),
    case("tool call arguments", m("assistant", "", '{"file": "docs/d.md"}'), ["docs/d.md"]),
    case("a user's words name nothing edited", m("user", "Applied edit to src/a.py"), []),
])
def test_edited_paths(message, expected):
    assert S._edited_paths(message) == expected


@pytest.mark.parametrize("paths, expected", [
    case("an absolute path ending with a listed one", ["src/a.py", "/home/u/src/a.py"], ["src/a.py"]),
    case("a bare name of a listed path", ["src/a.py", "a.py"], ["src/a.py"]),
    case("others stay", ["/etc/x.conf", "b.py", "src/a.py"], ["/etc/x.conf", "b.py", "src/a.py"]),
])
def test_without_repeats(paths, expected):
    assert S._without_repeats(paths) == expected


def test_files_in_lists_edits_before_mentions_once_each():
    round_ = Round(1, (m("user", "look at docs/x.md"), m("tool", "Applied edit to src/a.py"),
                       m("system", "Applied edit to sys.py")), (1, 3))
    assert S._files_in(round_) == ["src/a.py", "docs/x.md"]


def test_ran_text_is_empty_without_calls():
    assert S._ran_text([], set()) == ""

"""One deterministic summary bullet per round (no model call): the request's first line, what
was done, the files touched, each tool call with the gist of its result, and test results."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from ...types import Message, Round
from ..memo import NO_MEMO, Memo
from ..regex import lazy_regex
from .history import SUMMARY, tool_units
from .render import one_line

_NON_SPACE = lazy_regex(r"\S")


def _alternation_trie(words: Sequence[str]) -> str:
    """A regex matching exactly ``words`` (plain letters), factored by their leading characters:
    ``["py", "pyi", "php"]`` gives ``p(?:y(?:i)?|hp)``."""
    tails: dict[str, list[str]] = {}
    for word in words:
        tails.setdefault(word[:1], []).append(word[1:])
    branches = [re.escape(head) + _alternation_trie(rest) for head, rest in sorted(tails.items()) if head]
    if not branches:
        return ""
    if "" not in tails and len(branches) == 1:
        return branches[0]
    return "(?:" + "|".join(branches) + ")" + ("?" if "" in tails else "")


_EXT = (
    r"py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|kts|swift|c|h|cc|cpp|hpp|cs|rb|php|scala|sh|bash|zsh|"
    r"sql|md|mdx|rst|txt|toml|yaml|yml|json|jsonl|ini|cfg|conf|lock|html|css|scss|vue|svelte|"
    r"dart|lua|ex|exs|erl|hs|ml|r|jl|proto|graphql|tf|xml|gradle|csv|ipynb|env|log"
)
# Paths are found from their extension (a regex with a literal "." prefix, which the regex
# engine searches for fast) and grown backwards over path characters: a regex that starts with
# a character class would be tried at every position of a 4 MB transcript.
# The alternation is factored by leading letters (a trie), so a "." that starts no extension
# costs one character test, not sixty.
_EXTENSION = lazy_regex(r"\.(?:" + _alternation_trie(_EXT.split("|")) + r")(?![\w-])")
_PATH_CHARS_BACK = lazy_regex(r"[\w./~-]*")
_APPLIED = lazy_regex(r"\n(?:Applied edit to|Creating empty file|Wrote) ([^\n]+)")
_SEARCH_BLOCK = lazy_regex(r"\n<<<<<<< SEARCH")
_COMMIT = lazy_regex(r"\nCommit ([0-9a-f]{7,40}) ([^\n]+)")
# Test results: keywords found with a fast alternation, then widened to their line.
_TEST_KEY = lazy_regex(
    r"passed|failed|Failed|Passed|FAILED|PASSED|ERROR|Error|Traceback|exit code|Ran \d+ test|\nOK\b"
)
_FILLER = frozenset(
    ("certainly", "sure", "okay", "ok", "yes", "alright", "great", "understood", "got it", "absolutely", "of course")
)
_SENTENCE_END = lazy_regex(r"(?<=[.!?])\s")

_MAX_FILES = 6
_MAX_TESTS = 2
_MAX_CALLS = 3
_MAX_SCAN = 200_000  # characters of one message scanned for paths and test results


def _first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped; past 50 blank lines, all the rest, stripped."""
    found = _NON_SPACE.search(text)
    if found is None:
        return ""
    start = text.rfind("\n", 0, found.start()) + 1
    if start and text.count("\n", 0, start) >= 50:  # the first 50 lines are blank: the rest is one piece
        return text.split("\n", 50)[-1].strip()
    end = text.find("\n", start)
    return text[start:end if end >= 0 else len(text)].strip()


def _first_sentence(text: str) -> str:
    """The first sentence of the first line, skipping fillers such as "Certainly!"."""
    line = _first_line(text)
    start = 0
    for end in _SENTENCE_END.finditer(line):
        sentence = line[start:end.start()]
        if sentence.strip(" !.,").lower() not in _FILLER:
            return sentence
        start = end.end()
    return line[start:]


def find_paths(text: str, limit: int = 64) -> list[str]:
    """File paths mentioned in ``text`` (``src/x.py``, ``setup.py``), in order, without repeats;
    at most ``limit`` of them."""
    seen: dict[str, None] = {}
    text = text[:_MAX_SCAN]
    for match in _EXTENSION.finditer(text):
        if len(seen) >= limit:
            break
        dot = match.start()
        if dot == 0:
            continue
        back = text[max(0, dot - 120) : dot][::-1]
        width = _PATH_CHARS_BACK.match(back).end()
        if width == 0:
            continue
        path = text[dot - width : match.end()]
        if path[0] == ".":
            if path.startswith("..."):
                path = path.lstrip(".")  # an ellipsis, not a relative path
            while path.startswith("./"):
                path = path[2:]
        if path[:1] == "/" and (path.startswith("//") or text[dot - width - 1 : dot - width] == ":"):
            continue  # a URL
        if path and path[0] != "-" and path[0] != "." or path.startswith((".github", ".planning", "../")):
            seen.setdefault(path, None)
    return list(seen)


def _header_paths(content: str) -> list[str]:
    """aider: the file named above each SEARCH/REPLACE block (the line before the fence)."""
    found = []
    text = "\n" + content
    for match in _SEARCH_BLOCK.finditer(text):
        fence = text.rfind("\n", 0, match.start())
        head = text.rfind("\n", 0, fence) if fence > 0 else -1
        if head >= 0 and text.startswith("```", fence + 1):
            name = text[head + 1 : fence].strip().strip("`*")
            if name and " " not in name and len(name) <= 120:
                found.append(name)
    return found


def _files_in(round_: Round) -> list[str]:
    """The files a round touched (up to 64, once each): those its edits and tool calls name first,
    then those its messages mention, less the ones that repeat another (:func:`_without_repeats`)."""
    first: dict[str, None] = {}
    later: dict[str, None] = {}
    for message in round_.messages:
        if message.role == "system":
            continue
        for path in _edited_paths(message):
            first.setdefault(path, None)
        if len(later) < 64:
            for path in find_paths(message.content, 64 - len(later)):
                later.setdefault(path, None)
    for path in later:
        first.setdefault(path, None)
    return _without_repeats([p for p in first if p][:64])


def _edited_paths(message: Message) -> list[str]:
    """The paths a message says it changed, in order: the files a tool's output says it applied
    edits to, the headers of an assistant's SEARCH/REPLACE blocks, the paths in its tool calls."""
    content = message.content
    found: list[str] = []
    if message.role == "tool":
        found += [match.group(1).strip().rstrip(".,:;") for match in _APPLIED.finditer("\n" + content[:_MAX_SCAN])]
    elif message.role == "assistant" and "<<<<<<< SEARCH" in content:
        found += _header_paths(content[:_MAX_SCAN])
    for call in message.tool_calls:
        found += find_paths(str(call.get("arguments", "")))
    return found


def _without_repeats(paths: list[str]) -> list[str]:
    """The paths without those that say nothing new: an absolute path ending with a relative
    path listed, a bare name that is the last part of a relative path listed."""
    relative = {p for p in paths if not p.startswith(("/", "~"))}
    names = {r.rpartition("/")[2] for r in relative if "/" in r}  # what a bare name would repeat
    return [p for p in paths if not (p.startswith(("/", "~")) and _ends_with_one_of(p, relative))
            and not ("/" not in p and p in names)]


def _ends_with_one_of(path: str, relative: set[str]) -> bool:
    """Whether ``path`` ends with "/" + one of ``relative`` (each tail after a "/" looked up)."""
    slash = path.find("/")
    while slash >= 0:
        if path[slash + 1:] in relative:
            return True
        slash = path.find("/", slash + 1)
    return False


def _line_at(text: str, pos: int) -> str:
    begin = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[begin : end if end >= 0 else len(text)]


def _test_lines(text: str, limit: int) -> list[str]:
    """Up to ``limit`` test-result lines, failures first, then counts ("3 passed"), then the rest."""
    found: list[str] = []
    text = text[:_MAX_SCAN]
    for match in _TEST_KEY.finditer(text):
        line = one_line(_line_at(text, match.start() + (1 if text[match.start()] == "\n" else 0)).strip(" =-*#>"), 90)
        if line and line not in found:
            found.append(line)
            if len(found) >= 4 * limit:
                break
    return sorted(found, key=_test_line_rank)[:limit]


_FAILURE = lazy_regex(r"FAILED|\bfailed\b|Error|ERROR|Traceback|exit code [1-9]")
_COUNTS = lazy_regex(r"\d+ (?:passed|failed)|Ran \d+ test")


def _test_line_rank(line: str) -> int:
    return 0 if _FAILURE.search(line) else 1 if _COUNTS.search(line) else 2


def _tests_in(messages: Iterable[Message], skip: set[str]) -> list[str]:
    found: list[str] = []
    for message in messages:
        if message.role != "tool":
            continue
        for line in _test_lines(message.content, _MAX_TESTS + len(skip)):
            if line not in skip and line not in found:
                found.append(line)
                if len(found) >= _MAX_TESTS:
                    return found
    return found


def _result_gist(results: Sequence[Message]) -> str:
    if not results:
        return "no result recorded"
    for result in results:
        lines = _test_lines(result.content, 1)
        if lines:
            return one_line(lines[0], 70)
    text = _first_line(results[0].content)
    return one_line(text, 70) if text else "(empty result)"


def round_summary(round_: Round, memo: Memo = NO_MEMO) -> str:
    """One deterministic summary bullet for a round (no model call), made once per round
    content when ``memo`` keeps it; see :func:`_summarize_round`."""
    return memo.get(SUMMARY, round_.digest, lambda: _summarize_round(round_))


def round_summaries(rounds: Iterable[Round], memo: Memo = NO_MEMO) -> tuple[str, ...]:
    """The summary bullet of every round, oldest first (each made once: :func:`round_summary`;
    in runs of rounds, :meth:`Memo.values_of`)."""
    rounds = tuple(rounds)
    return memo.values_of(SUMMARY, rounds, [r.digest for r in rounds], _summarize_round)


def _summarize_round(round_: Round) -> str:
    """One deterministic summary bullet for a round (no model call).

    Request's first line, what was done (aider's commit line or the assistant's first
    sentence), files touched (aider's "Applied edit to" and paths the round mentions), each
    tool call together with the gist of its result, and test results the round shows.
    """
    user = next((m for m in round_.messages if m.role == "user"), None)
    request = one_line(_first_line(user.content), 120) if user else "(no user request)"
    where = f" (lines {round_.lines[0]}-{round_.lines[1]})" if round_.lines else ""
    parts = [f"- Round {round_.index}{where}: {request}"]

    done = _done_text(round_.messages)
    if done:
        parts.append(f"done: {done}")
    files = _files_in(round_)
    if files:
        extra = f" (+{len(files) - _MAX_FILES} more)" if len(files) > _MAX_FILES else ""
        parts.append("files: " + ", ".join(files[:_MAX_FILES]) + extra)
    shown: set[str] = set()
    ran = _ran_text(tool_units(round_), shown)
    if ran:
        parts.append(ran)
    tests = _tests_in(round_.messages, shown)
    if tests:
        parts.append("tests: " + " | ".join(tests))
    return parts[0] + (" — " + "; ".join(parts[1:]) if len(parts) > 1 else "")


def _done_text(messages: Sequence[Message]) -> str:
    """What the round did: aider's commit lines (two, then how many more), else the first
    sentence of the last thing the assistant said; "" when neither."""
    commits = [f"commit {m.group(1)[:7]} {m.group(2).strip()}"
               for message in messages if message.role == "tool" for m in _COMMIT.finditer("\n" + message.content)]
    if commits:
        more = f" (+{len(commits) - 2} more commits)" if len(commits) > 2 else ""
        return "; ".join(one_line(c, 100) for c in commits[:2]) + more
    last = next((m for m in reversed(messages) if m.role == "assistant" and m.content.strip()), None)
    return one_line(_first_sentence(last.content), 140) if last is not None else ""


def _ran_text(units: list, shown: set[str]) -> str:
    """``ran: name `args` → gist; ...`` of the round's tool calls (the first _MAX_CALLS, then how
    many more), adding each gist to ``shown``; "" without calls."""
    if not units:
        return ""
    calls = []
    for call, results in units[:_MAX_CALLS]:
        gist = _result_gist(results)
        shown.add(gist)
        calls.append(f"{call.get('name', 'tool')} `{one_line(str(call.get('arguments', '')), 60)}` → {gist}")
    extra = f" (+{len(units) - _MAX_CALLS} more calls)" if len(units) > _MAX_CALLS else ""
    return "ran: " + "; ".join(calls) + extra


def summarize_rounds(rounds: Iterable[Round], summaries: Sequence[str] | None = None) -> str:
    """One summary bullet per round, oldest first (``summaries``: the bullets, already made)."""
    return "\n".join(summaries if summaries is not None else round_summaries(rounds))

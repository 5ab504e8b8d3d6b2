"""Session transcripts: parse them into rounds, render rounds verbatim, summarise old rounds.

Two formats are read (LAYOUT.md):

* the JSON Lines ``session.log`` (one message a line: ``role``, ``content``, optional
  ``round``, ``tool_calls`` and ``call_id``); a malformed line is a warning with its line
  number and is skipped;
* aider's ``.aider.chat.history.md``: ``# aider chat started at`` opens a session,
  ``#### `` lines are the user's turn, ``> `` lines are tool output, the rest is the assistant.

A round is one user request and everything up to the next one. A tool call and its results
are one unit: rendering shows each result right under its call, and the one-line summary of a
round names a call only together with its result. Everything here is pure, deterministic and
line-oriented (no model call, no token counting), so the 4 MB aider transcript of the corpus
parses and compacts in a fraction of one tiktoken pass over it. The truncation stage reuses
:func:`render_rounds`, :func:`round_summary` and :func:`compact_history`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..types import Message, Round

JSONL = "jsonl"
AIDER = "aider"

_ROLES = frozenset(("user", "assistant", "tool", "system"))


@dataclass(frozen=True)
class SessionHistory:
    """The parsed rounds of one session file, with the warnings met and where it came from."""

    rounds: tuple[Round, ...] = ()
    warnings: tuple[str, ...] = ()
    source: str | None = None  # the file path; None when there is no session
    format: str | None = None  # "jsonl" | "aider"
    sessions: int = 0  # aider: how many "# aider chat started" headers; jsonl: 1
    total_lines: int = 0

    @property
    def message_count(self) -> int:
        return sum(len(r.messages) for r in self.rounds)


# ----------------------------------------------------------------------------- detection


def detect_format(path: str, text: str) -> str:
    """``aider`` for an aider chat history (by name or content), else ``jsonl``."""
    name = os.path.basename(path)
    if name.endswith(".md") or "aider" in name:
        return AIDER
    head = text.lstrip()[:1]
    if head == "{":
        return JSONL
    if "# aider chat started at" in text[:65536] or "\n#### " in text[:65536]:
        return AIDER
    return JSONL


def parse_session(text: str, path: str, fmt: str | None = None) -> SessionHistory:
    """Parse a session file of either format (``fmt`` None: detect it)."""
    fmt = fmt or detect_format(path, text)
    if fmt == AIDER:
        return parse_aider(text, path)
    return parse_jsonl(text, path)


# ----------------------------------------------------------------------------- JSON Lines


def _text_of(content: Any) -> str:
    """Message content as text: strings as they are, OpenAI-style parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                value = part.get("text", part.get("content", ""))
                parts.append(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True)


def _normalise_call(call: Any, fallback_id: str) -> dict | None:
    """A tool call as {"id", "name", "arguments"} (OpenAI's nested "function" form too)."""
    if not isinstance(call, dict):
        return None
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = call.get("name", function.get("name", "tool"))
    arguments = call.get("arguments", function.get("arguments", call.get("input", "")))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, sort_keys=True)
    call_id = call.get("id") or call.get("call_id") or fallback_id
    return {"id": str(call_id), "name": str(name), "arguments": arguments}


def parse_jsonl(text: str, path: str) -> SessionHistory:
    """Rounds of a JSON Lines session log; bad lines become warnings with their line number.

    A round is the messages sharing a ``round`` value; without one, a new round starts at
    each user message. A tool result whose call sits in an earlier round joins that round, so
    a call and its results are never split across rounds.
    """
    warnings: list[str] = []
    groups: list[list[Message]] = []
    current_key: Any = object()
    auto = 0
    lines = text.split("\n")
    loads = json.loads
    for number, raw in enumerate(lines, 1):
        if not raw or raw.isspace():
            continue
        try:
            obj = loads(raw)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            warnings.append(f"{path}:{number}: malformed JSON line skipped ({msg})")
            continue
        if not isinstance(obj, dict):
            warnings.append(f"{path}:{number}: not a JSON object; line skipped")
            continue
        role = obj.get("role")
        if role not in _ROLES:
            warnings.append(
                f"{path}:{number}: 'role' must be one of user, assistant, tool, system (got {role!r}); line skipped"
            )
            continue
        calls = ()
        raw_calls = obj.get("tool_calls") or ()
        if raw_calls and not isinstance(raw_calls, list):
            warnings.append(f"{path}:{number}: 'tool_calls' must be a list; calls ignored")
            raw_calls = ()
        if raw_calls:
            normalised = [_normalise_call(c, f"L{number}.{i}") for i, c in enumerate(raw_calls, 1)]
            if any(c is None for c in normalised):
                warnings.append(f"{path}:{number}: a tool call that is not an object was ignored")
            calls = tuple(c for c in normalised if c is not None)
        call_id = obj.get("call_id", obj.get("tool_call_id"))
        key = obj.get("round")
        if key is None:
            if role == "user":
                auto += 1
                key = ("auto", auto)
            else:
                key = current_key
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        message = Message(
            role=role,
            content=_text_of(obj.get("content")),
            round=0,  # set below, once rounds are numbered
            line=number,
            tool_calls=calls,
            call_id=None if call_id is None else str(call_id),
            usage=usage,
        )
        if not groups or key != current_key:
            groups.append([])
            current_key = key
        groups[-1].append(message)

    # A tool result follows its call into the call's round.
    owner: dict[str, int] = {}
    moved: list[list[Message]] = [[] for _ in groups]
    for gi, group in enumerate(groups):
        for message in group:
            target = gi
            if message.role == "tool" and message.call_id is not None and message.call_id in owner:
                target = min(gi, owner[message.call_id])
            moved[target].append(message)
            for call in message.tool_calls:
                owner.setdefault(call["id"], gi)
    # Warn about results without a call, once per id.
    for group in moved:
        for message in group:
            if message.role == "tool" and message.call_id is not None and message.call_id not in owner:
                warnings.append(
                    f"{path}:{message.line}: tool result for call {message.call_id!r} has no matching tool call"
                )
    rounds = _number_rounds([g for g in moved if g])
    return SessionHistory(tuple(rounds), tuple(warnings), path, JSONL, 1 if rounds else 0, len(lines))


def _number_rounds(groups: Sequence[Sequence[Message]]) -> list[Round]:
    rounds = []
    for index, group in enumerate(groups, 1):
        messages = tuple(
            m if m.round == index else Message(m.role, m.content, index, m.line, m.tool_calls, m.call_id, m.usage)
            for m in group
        )
        numbers = [m.line for m in messages if m.line is not None]
        lines = (min(numbers), max(numbers)) if numbers else None
        rounds.append(Round(index=index, messages=messages, lines=lines))
    return rounds


# ----------------------------------------------------------------------------- aider


def parse_aider(text: str, path: str) -> SessionHistory:
    """Rounds of an aider ``.aider.chat.history.md``.

    ``# aider chat started at`` opens a session (kept as a system message at the head of the
    session's first round); consecutive ``#### `` lines are one user message, and a user
    message opens a round (a bare blank line between two ``#### `` runs separates two
    messages); ``> `` lines are tool output; everything else is the assistant. Blank lines
    never switch roles. Output before a session's first user message (aider's start-up
    banner) belongs to no round. Line-oriented: one pass that only classifies lines, then
    each run of lines becomes one message by slicing.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # runs: (kind, first index, last non-blank index) ; kind "user" | "tool" | "assistant" | "header"
    runs: list[tuple[str, int, int]] = []
    role = None
    start = last = 0
    blank_after = False
    for i, line in enumerate(lines):
        if not line:
            blank_after = True
            continue
        first = line[0]
        if first == "#":
            if line.startswith("####") and line[4:5] in (" ", ""):
                kind = "user"
            elif line.startswith("# aider chat started at"):
                if role is not None:
                    runs.append((role, start, last))
                runs.append(("header", i, i))
                role = None
                blank_after = False
                continue
            else:
                kind = "assistant"
        elif first == ">":
            kind = "tool"
        elif (first == " " or first == "\t") and line.isspace():
            blank_after = True
            continue
        else:
            kind = "assistant"
        if kind != role or (blank_after and kind == "user"):
            if role is not None:
                runs.append((role, start, last))
            role = kind
            start = i
        last = i
        blank_after = False
    if role is not None:
        runs.append((role, start, last))

    groups: list[list[Message]] = []
    ends: list[int] = []
    header: Message | None = None
    sessions = 0
    for kind, a, b in runs:
        if kind == "header":
            sessions += 1
            header = Message("system", lines[a][2:].rstrip(), 0, a + 1)
            continue
        if kind == "user":
            groups.append([header] if header is not None else [])
            ends.append(b + 1)
            header = None
        elif not groups or (header is not None):
            continue  # start-up output before the session's first request
        block = "\n".join(lines[a : b + 1])
        if kind == "user":
            block = _USER_PREFIX.sub("\n", "\n" + block)[1:].replace("  \n", "\n").rstrip()
        elif kind == "tool":
            block = _TOOL_PREFIX.sub("\n", "\n" + block)[1:].replace("  \n", "\n").rstrip()
        groups[-1].append(Message(kind, block, 0, a + 1))
        ends[-1] = b + 1

    rounds = []
    for index, (group, end) in enumerate(zip(groups, ends), 1):
        messages = tuple(Message(m.role, m.content, index, m.line) for m in group)
        begin = next((m.line for m in messages if m.role == "user"), messages[0].line)
        rounds.append(Round(index=index, messages=messages, lines=(begin, end)))
    return SessionHistory(tuple(rounds), (), path, AIDER, sessions, len(lines))


_USER_PREFIX = re.compile(r"\n#### ?")
_TOOL_PREFIX = re.compile(r"\n> ?")


# ----------------------------------------------------------------------------- tool units


def tool_units(round_: Round) -> list[tuple[Mapping[str, Any], tuple[Message, ...]]]:
    """Each tool call of the round with its results, in call order: [(call, results)]."""
    results: dict[str, list[Message]] = {}
    for message in round_.messages:
        if message.role == "tool" and message.call_id is not None:
            results.setdefault(message.call_id, []).append(message)
    units = []
    for message in round_.messages:
        for call in message.tool_calls:
            units.append((call, tuple(results.get(str(call.get("id")), ()))))
    return units


# ----------------------------------------------------------------------------- rendering


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def render_round(round_: Round) -> str:
    """One round verbatim: each message under its role, each tool result right under its call."""
    lines_note = f" · lines {round_.lines[0]}-{round_.lines[1]}" if round_.lines else ""
    out = [f"### Round {round_.index}{lines_note}"]
    call_ids = {str(c.get("id")) for m in round_.messages for c in m.tool_calls}
    results: dict[str, list[Message]] = {}
    for message in round_.messages:
        if message.role == "tool" and message.call_id is not None and message.call_id in call_ids:
            results.setdefault(message.call_id, []).append(message)
    for message in round_.messages:
        if message.role == "tool" and message.call_id is not None and message.call_id in call_ids:
            continue  # shown under its call
        if message.role == "system":
            out.append(f"[session] {message.content}")
            continue
        if message.role == "tool":
            label = f"[tool output {message.call_id}]" if message.call_id else "[tool output]"
            out.append(label)
            out.append(message.content)
            continue
        if message.content:
            out.append(f"[{message.role}]")
            out.append(message.content)
        for call in message.tool_calls:
            call_id = str(call.get("id"))
            out.append(f"[tool call {call_id}] {call.get('name', 'tool')}: {call.get('arguments', '')}")
            found = results.get(call_id)
            if not found:
                out.append(f"[tool result {call_id}] (no result recorded)")
            for result in found or ():
                out.append(f"[tool result {call_id}]")
                out.append(_indent(result.content) if result.content else "    (empty)")
    return "\n".join(out)


def render_rounds(rounds: Iterable[Round]) -> str:
    """The rounds verbatim, oldest first, separated by blank lines."""
    return "\n\n".join(render_round(r) for r in rounds)


# ----------------------------------------------------------------------------- summaries

_EXT = (
    r"py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|kts|swift|c|h|cc|cpp|hpp|cs|rb|php|scala|sh|bash|zsh|"
    r"sql|md|mdx|rst|txt|toml|yaml|yml|json|jsonl|ini|cfg|conf|lock|html|css|scss|vue|svelte|"
    r"dart|lua|ex|exs|erl|hs|ml|r|jl|proto|graphql|tf|xml|gradle|csv|ipynb|env"
)
# Paths mentioned in text: with a folder (src/x.py) or a known extension (setup.py).
_PATH = re.compile(
    r"(?<![\w/.@-])((?:[\w.-]+/)+[\w.-]*\w|[\w-][\w.-]*\.(?:" + _EXT + r"))(?![\w/-])"
)
_APPLIED = re.compile(r"^(?:Applied edit to|Added|Creating empty file|Create new file\?)\s*(\S+)", re.M)
_COMMIT = re.compile(r"^Commit ([0-9a-f]{7,40}) (.+)$", re.M)
_TEST_LINE = re.compile(
    r"^.*(?:\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|tests? (?:passed|failed))\b"
    r"|\bFAILED\b|\bFailed\b|\bPassed\b|\bPASSED\b|\bERROR\b|\b\w*Error\b|Traceback \(most recent"
    r"|exit code:? \d+|^OK\b|\bRan \d+ tests?\b|\btests? (?:passed|failed)\b).*$",
    re.M,
)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s")
_URLISH = re.compile(r"^(?:https?:|www\.)")

_MAX_FILES = 6
_MAX_TESTS = 2
_MAX_CALLS = 3


def _first_line(text: str) -> str:
    for line in text.split("\n", 50):
        if line.strip():
            return line.strip()
    return ""


def _first_sentence(text: str) -> str:
    line = _first_line(text)
    if not line:
        return ""
    match = _SENTENCE_END.search(line)
    return line[: match.start()] if match else line


def _files_in(round_: Round) -> list[str]:
    seen: dict[str, None] = {}
    for message in round_.messages:
        content = message.content
        if message.role == "tool":
            for match in _APPLIED.finditer(content):
                seen.setdefault(match.group(1).rstrip(".,:;"), None)
        for call in message.tool_calls:
            for match in _PATH.finditer(str(call.get("arguments", ""))):
                seen.setdefault(match.group(1), None)
        if message.role != "system":
            for match in _PATH.finditer(content):
                path = match.group(1)
                if not _URLISH.match(path) and not path.startswith("..."):
                    seen.setdefault(path, None)
    return [p for p in seen if p and not p.endswith("/") and len(p) <= 120]


def _tests_in(messages: Iterable[Message], skip: set[str]) -> list[str]:
    found: list[str] = []
    for message in messages:
        if message.role != "tool":
            continue
        for match in _TEST_LINE.finditer(message.content):
            line = _one_line(match.group(0).strip(" =-*#>"), 90)
            if line and line not in skip and line not in found:
                found.append(line)
                if len(found) >= _MAX_TESTS:
                    return found
    return found


def _result_gist(results: Sequence[Message]) -> str:
    if not results:
        return "no result recorded"
    for result in results:
        match = _TEST_LINE.search(result.content)
        if match:
            return _one_line(match.group(0).strip(" =-*#>"), 70)
    text = _first_line(results[0].content)
    return _one_line(text, 70) if text else "(empty result)"


def round_summary(round_: Round) -> str:
    """One deterministic summary bullet for a round (no model call).

    Request's first line, what was done (aider's commit line or the assistant's first
    sentence), files touched (aider's "Applied edit to" and paths the round mentions), each
    tool call together with the gist of its result, and test results the round shows.
    """
    user = next((m for m in round_.messages if m.role == "user"), None)
    request = _one_line(_first_line(user.content), 120) if user else "(no user request)"
    where = f" (lines {round_.lines[0]}-{round_.lines[1]})" if round_.lines else ""
    parts = [f"- Round {round_.index}{where}: {request}"]

    done = ""
    commits = []
    for message in round_.messages:
        if message.role == "tool":
            commits.extend(f"commit {m.group(1)[:7]} {m.group(2).strip()}" for m in _COMMIT.finditer(message.content))
    if commits:
        done = "; ".join(_one_line(c, 100) for c in commits[:2])
        if len(commits) > 2:
            done += f" (+{len(commits) - 2} more commits)"
    else:
        for message in round_.messages:
            if message.role == "assistant" and message.content.strip():
                done = _one_line(_first_sentence(message.content), 140)
                break
    if done:
        parts.append(f"done: {done}")

    files = _files_in(round_)
    if files:
        extra = f" (+{len(files) - _MAX_FILES} more)" if len(files) > _MAX_FILES else ""
        parts.append("files: " + ", ".join(files[:_MAX_FILES]) + extra)

    shown: set[str] = set()
    units = tool_units(round_)
    if units:
        calls = []
        for call, results in units[:_MAX_CALLS]:
            gist = _result_gist(results)
            shown.add(gist)
            args = _one_line(str(call.get("arguments", "")), 60)
            calls.append(f"{call.get('name', 'tool')} `{args}` → {gist}")
        extra = f" (+{len(units) - _MAX_CALLS} more calls)" if len(units) > _MAX_CALLS else ""
        parts.append("ran: " + "; ".join(calls) + extra)

    tests = _tests_in(round_.messages, shown)
    if tests:
        parts.append("tests: " + " | ".join(tests))
    return parts[0] + (" — " + "; ".join(parts[1:]) if len(parts) > 1 else "")


def summarize_rounds(rounds: Iterable[Round]) -> str:
    """One summary bullet per round, oldest first."""
    return "\n".join(round_summary(r) for r in rounds)


def compact_history(rounds: Sequence[Round], keep_last: int) -> str:
    """The last ``keep_last`` rounds verbatim, every older round as one summary bullet."""
    rounds = tuple(rounds)
    keep_last = max(0, min(int(keep_last), len(rounds)))
    split = len(rounds) - keep_last
    older, recent = rounds[:split], rounds[split:]
    parts = []
    if older:
        parts.append(
            f"Earlier rounds ({len(older)}, summarised; rounds {older[0].index}-{older[-1].index}):\n"
            + summarize_rounds(older)
        )
    if recent:
        parts.append(f"Recent rounds ({len(recent)}, verbatim):\n\n" + render_rounds(recent))
    return "\n\n".join(parts)

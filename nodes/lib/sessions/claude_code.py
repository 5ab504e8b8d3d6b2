"""Claude Code transcripts as session rounds.

Claude Code (which GSD runs inside) writes each session as JSON Lines under
``~/.claude/projects/<project path, every non-alphanumeric character as "-">/<session>.jsonl``
(``$CLAUDE_CONFIG_DIR/projects`` when that is set): one event a line, ``type`` user,
assistant, system, summary, progress, file-history-snapshot ...; ``message`` holds ``role``
and ``content`` (a string, or blocks text / tool_use / tool_result / thinking / image);
``uuid`` and ``parentUuid`` chain the events, ``isSidechain`` marks subagent work.

How the events become :class:`~ctxengine.nodes.types.Round` s (:func:`parse_claude_code`):

- the thread is the ``parentUuid`` chain back from the newest event (through a compaction's
  ``logicalParentUuid``); a branch that forks off it and holds a user prompt was abandoned
  (the user rewound and asked again) and is left out; branches without a prompt (parallel
  tool results hang off their own tool_use) and events whose chain leaves the file (an
  excerpt, a resumed session) stay, in file order;
- one round per real user prompt (text, not only tool_result blocks; not ``isMeta``);
  slash commands read as "/name args", an interruption or a local command's output is a
  session note, not a prompt;
- the assistant's text and tool calls (``tool_use``: id, name, input as JSON) are kept;
  each ``tool_result`` is a tool message with its call's id, its text capped (head and tail
  lines, then characters, with a note of what was left out); thinking blocks are dropped;
  consecutive events of one API message are one assistant message;
- sidechain events (subagent work) never join the main thread: with ``sidechains="fold"``
  each subagent's chain becomes one line (its tools and its last words) added to the result
  of the Task call that spawned it (one result a call), found by ``agentId``, else by the
  chain's first message, which is the call's ``input.prompt`` (parallel Tasks each get their
  own), else by time (the line then says so); with ``"drop"`` they are left out;
- a compaction (``system`` / ``compact_boundary`` and the ``isCompactSummary`` message after
  it) replaces the rounds before it by one round holding Claude Code's summary and the
  folded rounds' requests (``compacted="keep"``: the rounds stay and the summary is a round
  of its own); a ``summary`` event (a title Claude Code gives the conversation up to its
  ``leafUuid``) is a session note at the end of that leaf's round, and left out when its leaf
  is no line of the file (the title of another session);
- a transcript found in Claude Code's own folder is read for its project only
  (``Options.cwds``): several projects share one folder name (``/t/a-b``, ``/t/a.b`` and
  ``/t/a/b`` are all ``-t-a-b``), so a line recorded in another folder (its ``cwd`` is not the
  project or a folder inside it; a conversation event without a ``cwd``) is skipped, and one
  note counts them without saying anything of theirs (a ``summary`` of theirs has its leaf
  among them, so it is left out as well);
- like a JSON Lines log (:mod:`.jsonl`), only the newest ``MAX_LOG_LINES`` lines are read
  and the newest ``MAX_ROUNDS`` rounds kept, each cap with one warning;
- a malformed line is a warning naming ``file:line`` (capped per kind as every build's warnings); the text is walked line by line and
  each event is reduced to what the rounds need as it is read (progress events keep only
  their ids), so a large transcript never holds more than its text and the kept parts.

``usage`` is not copied: Claude Code's usage counts the whole API call (the context sent
with it), not the message, so it would mislead the budget monitor.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import stat
from collections import Counter
from itertools import islice
from dataclasses import astuple, dataclass, field, replace
from typing import Any, Iterator, Mapping

from ...types import Message
from ..digest import digest16, text_digest
from ..memo import NO_MEMO, Memo
from ..quote import capped_warnings
from .history import (LINE, MAX_LOG_LINES, MAX_ROUNDS, SessionHistory, lines_cap_warning, newest_lines_start,
                      number_rounds, rounds_cap_warning)

CLAUDE_CODE = "claude-code"
#: Tool names whose calls start a subagent (sidechain).
SUBAGENT_TOOLS = frozenset(("Task", "Agent"))
_NOTE_TAGS = ("local-command-stdout", "local-command-stderr", "bash-stdout", "bash-stderr", "task-notification")
_SKIP_TAGS = ("local-command-caveat",)
_TAG = re.compile(r"<([a-z-]+)>(.*?)</\1>", re.S)
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class Options:
    """How a transcript is read (the ``state.claudeCode.*`` keys)."""

    sidechains: str = "fold"  # fold | drop
    compacted: str = "fold"  # fold | keep
    result_max_lines: int = 40  # a tool result's lines past this: head and tail kept
    result_max_chars: int = 4000  # then its characters past this: head and tail kept
    call_max_chars: int = 600  # a tool call's input (JSON) past this is cut
    cwds: tuple[str, ...] = ()  # when set: only events recorded in these folders (or inside them) are read


# ----------------------------------------------------------------------------- finding


def config_dir(environ: Mapping[str, str] | None = None) -> str:
    """Claude Code's folder: ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``."""
    environ = os.environ if environ is None else environ
    named = (environ.get("CLAUDE_CONFIG_DIR") or "").strip()
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.abspath(os.path.expanduser(named)) if named else os.path.join(home, ".claude")


def folder_name(project_path: str) -> str:
    """The folder Claude Code keeps a project's transcripts in: its absolute path with every
    character other than a letter or a digit replaced by "-" (``/a/b.c`` -> ``-a-b-c``)."""
    return _NOT_ALNUM.sub("-", project_path)


def project_folders(project_dir: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Where the project's transcripts may be: ``<config dir>/projects/<folder_name>`` for the
    project's absolute path and, when it differs, its real path (symlinks resolved)."""
    base = os.path.join(config_dir(environ), "projects")
    return list(dict.fromkeys(os.path.join(base, folder_name(p)) for p in project_paths(project_dir)))


def transcripts(folder: str) -> list[str]:
    """The ``*.jsonl`` regular files directly in ``folder``, newest (last modified; by name on
    a tie) first, leaving out subagent files (``agent-*.jsonl``); [] when there is none."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    keyed: list[tuple[float, str]] = []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("agent-"):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            keyed.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
        except OSError:
            continue
    return [os.path.join(folder, name) for _, name in sorted(keyed, reverse=True)]


def newest_transcript(folder: str) -> str | None:
    """The newest of :func:`transcripts` in ``folder``; None when there is none."""
    found = transcripts(folder)
    return found[0] if found else None


def project_paths(project_dir: str) -> tuple[str, ...]:
    """The folders a transcript of the project is recorded in: its absolute path and, when it
    differs, its real path (symlinks resolved)."""
    return tuple(dict.fromkeys((os.path.abspath(project_dir), os.path.realpath(project_dir))))


def in_project(cwd: str, paths: tuple[str, ...]) -> bool:
    """Whether the folder ``cwd`` (as a transcript records it) is one of ``paths`` or inside one
    (compared as strings: nothing is looked up on disk)."""
    folder = os.path.normpath(cwd) if os.path.isabs(cwd) else None
    return folder is not None and any(folder == p or folder.startswith(p.rstrip(os.sep) + os.sep) for p in paths)


def recorded_cwd(text: str) -> str | None:
    """The folder a transcript was recorded in: the top-level ``cwd`` of its first event that
    has one (within the first 200 lines); None when none says."""
    for _, line in islice(_lines(text), 200):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
            return obj["cwd"]
    return None


_HEAD_BYTES = 1 << 18


def head_cwd(path: str) -> str | None:
    """:func:`recorded_cwd` of the complete lines in the first 256 KiB of the regular file at
    ``path`` (not followed when a symlink); None when it cannot be read or does not say there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) == _HEAD_BYTES:
        data = data[:data.rfind(b"\n") + 1]
    return recorded_cwd(data.decode("utf-8", "replace"))


def is_claude_code(text: str) -> bool:
    """Whether ``text`` reads as a Claude Code transcript: its first JSON object line has a
    ``type`` and no top-level ``role`` (the session.log format's lines have a role)."""
    for _, line in islice(_lines(text), 20):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        return isinstance(obj, dict) and isinstance(obj.get("type"), str) and "role" not in obj
    return False


# ----------------------------------------------------------------------------- reading events


@dataclass
class _Event:
    """One user, assistant, system or summary event, reduced to what the rounds need."""

    line: int
    kind: str  # prompt | results | note | assistant | compact | boundary | summary
    uuid: str | None = None
    sidechain: bool = False
    timestamp: str = ""
    text: str = ""
    calls: tuple[dict, ...] = ()
    results: tuple[tuple[str, str], ...] = ()  # (tool_use_id, text)
    message_id: str | None = None
    agent_id: str | None = None
    leaf: str | None = None  # summary: the uuid it summarizes up to
    tasks: tuple[tuple[str, bytes], ...] = ()  # assistant: (id, digest of input.prompt) of each subagent call


@dataclass
class _Read:
    events: list[_Event] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)  # every uuid in the file -> its parent
    sessions: set = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    total_lines: int = 0
    foreign: int = 0  # lines skipped as recorded in another folder (Options.cwds)
    skipped: int = 0  # the oldest lines, left out (past MAX_LOG_LINES)


def _lines(text: str, start: int = 0, number: int = 0) -> Iterator[tuple[int, str]]:
    """(number, line) of each non-blank line from ``start`` (``number`` lines before it), without
    splitting the whole text at once."""
    size = len(text)
    while start < size:
        end = text.find("\n", start)
        end = size if end < 0 else end
        number += 1
        line = text[start:end]
        if line.strip():
            yield number, line
        start = end + 1


def _read(text: str, path: str, options: Options, memo: Memo = NO_MEMO) -> _Read:
    """The newest :data:`~.session.MAX_LOG_LINES` lines read (:func:`_read_line`), each once
    while it stays the same line at the same place (kept by the ``memo``: a transcript that grew
    decodes its new lines only); ``skipped`` counts the older lines left out."""
    offset, skipped = newest_lines_start(text, MAX_LOG_LINES)
    read = _Read(skipped=skipped, total_lines=skipped)
    where = pickle.dumps((CLAUDE_CODE, path, astuple(options)))  # once, not per line
    for number, raw in _lines(text, offset, skipped):
        read.total_lines = number
        key = digest16(where, number.to_bytes(8, "little"), raw.encode("utf-8", "surrogatepass"))
        uuid, parent, session, event, warnings, foreign = memo.get(
            LINE, key, lambda: _read_line(raw, number, path, options), persist=False)
        read.warnings.extend(warnings)
        read.foreign += foreign
        if uuid is not None:
            read.parents[uuid] = parent
        if session is not None:
            read.sessions.add(session)
        if event is not None:
            read.events.append(event)
    return read


def _read_line(raw: str, number: int, path: str, options: Options) -> tuple:
    """(uuid, parent uuid, session id, event, warnings, whether it was recorded in another
    folder) of one transcript line; the event is never changed once read."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        return None, None, None, None, (f"{path}:{number}: malformed JSON line skipped ({getattr(exc, 'msg', exc)})",), False
    except RecursionError:
        return None, None, None, None, (f"{path}:{number}: JSON nested too deeply to read; line skipped",), False
    if not isinstance(obj, dict):
        return None, None, None, None, (f"{path}:{number}: not a JSON object; line skipped",), False
    if options.cwds and not _recorded_here(obj, options.cwds):
        return None, None, None, None, (), True
    uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
    parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
    session = obj["sessionId"] if isinstance(obj.get("sessionId"), str) else None
    warnings: list[str] = []
    event = _event_of(obj, number, path, options, warnings)
    if event is not None:
        event.uuid, event.sidechain = uuid, bool(obj.get("isSidechain"))
        event.timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else ""
    return uuid, parent if isinstance(parent, str) else None, session, event, tuple(warnings), False


#: Event types that carry the conversation: read only with a ``cwd`` that is the project's.
_RECORDED_TYPES = frozenset(("user", "assistant", "system", "progress"))


def _recorded_here(obj: dict, cwds: tuple[str, ...]) -> bool:
    """Whether a decoded line may be read for the project in ``cwds``: its ``cwd`` is one of them
    (or inside one); a line without a ``cwd`` only when it is not a conversation event."""
    cwd = obj.get("cwd")
    if isinstance(cwd, str):
        return in_project(cwd, cwds)
    return cwd is None and obj.get("type") not in _RECORDED_TYPES


def _event_of(obj: dict, number: int, path: str, options: Options, warnings: list[str]) -> _Event | None:
    kind = obj.get("type")
    if kind == "summary":
        summary = obj.get("summary")
        return _Event(number, "summary", text=summary, leaf=obj.get("leafUuid")) if isinstance(summary, str) else None
    if kind == "system":
        if obj.get("subtype") == "compact_boundary":
            return _Event(number, "boundary", text=str(obj.get("content") or "Conversation compacted"))
        return None
    if kind not in ("user", "assistant"):
        return None  # progress, file-history-snapshot, queue-operation ...: only their ids count
    message = obj.get("message")
    if not isinstance(message, dict) or "content" not in message:
        warnings.append(f"{path}:{number}: a {kind} event without a message (role and content); line skipped")
        return None
    content = message["content"]
    if kind == "assistant":
        return _assistant(content, number, message.get("id"), options)
    return _user(obj, content, number, options)


def _assistant(content: Any, number: int, message_id: Any, options: Options) -> _Event:
    texts, calls, tasks = [], [], []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in ("tool_use", "server_tool_use"):
                arguments = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
                calls.append({"id": str(block.get("id") or f"L{number}.{len(calls) + 1}"),
                              "name": str(block.get("name") or "tool"),
                              "arguments": _cut(arguments, options.call_max_chars)})
                prompt = block.get("input", {}).get("prompt") if isinstance(block.get("input"), dict) else None
                if calls[-1]["name"] in SUBAGENT_TOOLS and isinstance(prompt, str):
                    tasks.append((calls[-1]["id"], _prompt_key(prompt)))
            # thinking and redacted_thinking blocks are the model's scratch work: dropped
    return _Event(number, "assistant", text="\n\n".join(t.strip() for t in texts if t.strip()), calls=tuple(calls),
                  message_id=message_id if isinstance(message_id, str) else None, tasks=tuple(tasks))


def _prompt_key(prompt: str) -> bytes:
    """What a subagent's first message and the ``prompt`` of the Task call that started it share:
    the digest of the text, its ends stripped (the full text is not kept)."""
    return text_digest(prompt.strip())


def _user(obj: dict, content: Any, number: int, options: Options) -> _Event | None:
    if obj.get("isCompactSummary"):
        return _Event(number, "compact", text=_plain_text(content))
    results, texts = [], []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            body = _plain_text(block.get("content"))
            if block.get("is_error"):
                body = "error: " + body
            results.append((str(block.get("tool_use_id")), capped(body, options.result_max_lines,
                                                                     options.result_max_chars)))
        else:
            texts.append(_plain_text([block]))
    agent = obj.get("agentId") if isinstance(obj.get("agentId"), str) else None
    if results:
        text = "\n".join(t for t in texts if t.strip())
        return _Event(number, "results", text=text, results=tuple(results), agent_id=agent)
    if obj.get("isMeta"):
        return None  # caveats and injected skill text: not the user's words
    return _prompt_or_note(_plain_text(content), number)


def _prompt_or_note(text: str, number: int) -> _Event | None:
    stripped = text.strip()
    if not stripped:
        return None
    tags = dict((m.group(1), m.group(2).strip()) for m in _TAG.finditer(stripped)) if stripped[0] == "<" else {}
    if any(tag in tags for tag in _SKIP_TAGS):
        return None
    if "command-name" in tags:
        return _Event(number, "prompt", text=f"{tags['command-name']} {tags.get('command-args', '')}".strip())
    if "bash-input" in tags:
        return _Event(number, "prompt", text="! " + tags["bash-input"])
    for tag in _NOTE_TAGS:
        if tag in tags:
            return _Event(number, "note", text=f"{tag}: {tags[tag]}".strip())
    if stripped.startswith("[Request interrupted by user"):
        return _Event(number, "note", text=stripped.strip("[]"))
    return _Event(number, "prompt", text=text)


def _plain_text(content: Any) -> str:
    """Message or tool-result content as text: strings as they are, blocks joined by lines
    (see :func:`_block_text`)."""
    if isinstance(content, list):
        return "\n".join(text for text in map(_block_text, content) if text is not None)
    return _block_text(content) or ""


def _block_text(block: Any) -> str | None:
    """One content block as text: a text block's text, an image as "[image]", a nested
    tool_result by its content, None for thinking; anything else as JSON."""
    if block is None or isinstance(block, str):
        return block
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in ("thinking", "redacted_thinking"):
        return None
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        return _plain_text(block.get("content"))
    return "[image]" if kind == "image" else json.dumps(block, sort_keys=True, ensure_ascii=False)


def capped(text: str, max_lines: int, max_chars: int) -> str:
    """``text`` with at most ``max_lines`` lines (the first two thirds and the last third of
    them kept, a note of how many were not shown between) and then at most ``max_chars``
    characters (likewise); unchanged when within both."""
    lines = text.split("\n")
    if max_lines > 0 and len(lines) > max_lines:
        head = max(1, (2 * max_lines) // 3)
        tail = max_lines - head
        kept = lines[:head] + [f"[… {len(lines) - head - tail} more lines not shown]"]
        text = "\n".join(kept + (lines[-tail:] if tail else []))
    if max_chars > 0 and len(text) > max_chars:
        head = (2 * max_chars) // 3
        tail = max_chars - head
        text = f"{text[:head]}\n[… {len(text) - head - tail} more characters not shown]\n{text[-tail:] if tail else ''}"
    return text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


# ----------------------------------------------------------------------------- the thread


def _thread(read: _Read) -> set[int]:
    """Lines of the events that are off the thread: on a branch that forks off the active
    chain and holds a user prompt (rewound and asked again)."""
    main = [e for e in read.events if not e.sidechain and e.uuid is not None and e.kind != "summary"]
    if not main:
        return set()
    active: set[str] = set()
    node: str | None = main[-1].uuid
    while node is not None and node not in active:
        active.add(node)
        node = read.parents.get(node)
    branch: dict[str, str | None] = {}  # uuid -> the first event of its branch off the chain (None: detached)
    for event in main:
        if event.uuid in active:
            continue
        path: list[str] = []
        node = event.uuid
        while node is not None and node not in active and node not in branch and node not in path:
            path.append(node)
            node = read.parents.get(node)
        root = path[-1] if node in active and path else branch.get(node) if node is not None else None
        for visited in path:
            branch[visited] = root
    abandoned = {branch[e.uuid] for e in main if e.kind == "prompt" and branch.get(e.uuid or "")}
    return {e.line for e in main if branch.get(e.uuid or "") in abandoned}


# ----------------------------------------------------------------------------- rounds


@dataclass
class _Builder:
    options: Options
    groups: list[list[Message]] = field(default_factory=list)
    calls: dict[str, tuple[int, str]] = field(default_factory=dict)  # tool_use id -> (group, timestamp)
    results: dict[str, str] = field(default_factory=dict)  # tool_use id -> timestamp of its result
    agents: dict[str, str] = field(default_factory=dict)  # agentId -> the tool_use id it answered
    prompts: dict[str, bytes] = field(default_factory=dict)  # subagent call id -> _prompt_key of its prompt
    uuid_group: dict[str, int] = field(default_factory=dict)
    starts: list[str] = field(default_factory=list)  # timestamp of each group's first event
    boundary: _Event | None = None
    last_message_id: str | None = None

    def open(self, event: _Event) -> list[Message]:
        self.groups.append([])
        self.starts.append(event.timestamp)
        self.last_message_id = None
        return self.groups[-1]

    def current(self, event: _Event) -> list[Message]:
        return self.groups[-1] if self.groups else self.open(event)

    def add(self, event: _Event) -> None:
        if event.kind == "boundary":
            self.settle(event)
            self.boundary = event
            return
        if event.kind == "compact":
            self.fold(event.text, event.line)
            return
        if event.kind == "prompt":
            self.settle(event)
            self.open(event).append(Message("user", event.text, 0, event.line))
        elif event.kind == "note":
            self.current(event).append(Message("system", event.text, 0, event.line))
        elif event.kind == "results":
            group = self.current(event)
            for call_id, text in event.results:
                group.append(Message("tool", text, 0, event.line, call_id=call_id))
                self.results.setdefault(call_id, event.timestamp)
                if event.agent_id:
                    self.agents.setdefault(event.agent_id, call_id)
            if event.text.strip():
                group.append(Message("system", event.text, 0, event.line))
        elif event.kind == "assistant":
            self.assistant(event)
        else:
            return
        if event.uuid:
            self.uuid_group[event.uuid] = len(self.groups) - 1
        if event.kind != "assistant":
            self.last_message_id = None

    def assistant(self, event: _Event) -> None:
        group = self.current(event)
        for call in event.calls:
            self.calls.setdefault(call["id"], (len(self.groups) - 1, event.timestamp))
        self.prompts.update(event.tasks)
        previous = group[-1] if group else None
        if previous is not None and previous.role == "assistant" and event.message_id \
                and event.message_id == self.last_message_id:
            text = "\n\n".join(t for t in (previous.content, event.text) if t)
            group[-1] = replace(previous, content=text, tool_calls=previous.tool_calls + event.calls)
        elif event.text or event.calls:
            group.append(Message("assistant", event.text, 0, event.line, event.calls))
        self.last_message_id = event.message_id

    def settle(self, event: _Event) -> None:
        """A compaction boundary with no summary message after it folds with its own text."""
        if self.boundary is not None:
            self.fold(self.boundary.text + " (no summary recorded)", event.line - 1)

    def fold(self, summary: str, line: int) -> None:
        start = self.boundary.line if self.boundary is not None else line
        self.boundary = None
        folded = [g for g in self.groups if g]
        requests = [f"- lines {g[0].line}-{g[-1].line}: {_first_line(g)}" for g in folded]
        if self.options.compacted == "keep" or not folded:
            head = "[Claude Code compacted the conversation here; its summary:]"
            self.groups.append([Message("user", f"{head}\n{summary}", 0, start)])
            self.starts.append("")
        else:
            asked = "; ".join(_first_line(g) for g in folded)
            asked = asked if len(asked) <= 160 else asked[:159] + "…"
            head = f"[Claude Code compacted {len(folded)} earlier round{'s' if len(folded) != 1 else ''} ({asked}); its summary:]"
            body = f"{head}\n{summary}\n\nThe rounds it replaces, by request:\n" + "\n".join(requests)
            first = folded[0][0].line or start
            message = Message("user", body, 0, first)
            self.groups = [[message, Message("system", f"Claude Code compacted the conversation at line {line}", 0, line)]]
            self.starts = [self.starts[0] if self.starts else ""]
            self.calls.clear()
            self.uuid_group.clear()
        self.last_message_id = None


def _first_line(group: list[Message]) -> str:
    user = next((m for m in group if m.role == "user"), None)
    text = user.content.strip() if user else "no user request (the transcript starts mid-round)"
    line = text.split("\n", 1)[0]
    return line if len(line) <= 100 else line[:99] + "…"


def _fold_sidechains(read: _Read, builder: _Builder, off: set[int]) -> None:
    """Each subagent's chain of sidechain events as one line under the call that spawned it,
    added to that call's result (one result a call), else a session note in the round it ran in.

    The call is found by the chain's ``agentId`` (on the call's result), else by its first
    message: the subagent call whose ``input.prompt`` it is (parallel calls each have their
    own); only when neither says, by time (the first subagent call whose run spans the chain's
    start), and the line says so."""
    side = [e for e in read.events if e.sidechain and e.line not in off]
    chains: dict[str, list[_Event]] = {}
    for event in side:
        chains.setdefault(_chain_root(event, read), []).append(event)
    by_prompt: dict[bytes, list[str]] = {}
    for call_id, key in builder.prompts.items():
        if call_id in builder.calls:
            by_prompt.setdefault(key, []).append(call_id)
    taken: set[str] = set()
    matched: list[tuple[list[_Event], str | None, bool]] = []  # (chain, its call, matched by time)
    for root, events in chains.items():
        agent = next((e.agent_id for e in events if e.agent_id), None)
        call_id = builder.agents.get(agent) if agent else None
        if call_id is None or call_id not in builder.calls:  # (an agent's chains all go to its call)
            opening = next((e.text for e in events if e.uuid == root and e.kind == "prompt"), None)
            call_id = next((c for c in by_prompt.get(_prompt_key(opening), ()) if c not in taken), None) \
                if opening is not None else None
        if call_id is not None:
            taken.add(call_id)
        matched.append((events, call_id, False))
    for index, (events, call_id, _) in enumerate(matched):  # by time: calls no chain named first
        if call_id is None:
            first = min((e.timestamp for e in events if e.timestamp), default="")
            running = [cid for cid, (_, ts) in builder.calls.items() if _spawns(builder, cid, ts, first)]
            call_id = next((cid for cid in running if cid not in taken), running[0] if running else None)
            if call_id is not None:
                taken.add(call_id)
                matched[index] = (events, call_id, True)
    for events, call_id, by_time in matched:
        line = _sidechain_line(events)
        if call_id is not None:
            if by_time:
                line += " [matched to this call by time: no subagent call's prompt is its first message]"
            _add_to_result(builder.groups[builder.calls[call_id][0]], call_id, line, events[0].line)
            continue
        first = min((e.timestamp for e in events if e.timestamp), default="")
        if first and builder.groups:
            index = max((i for i, ts in enumerate(builder.starts) if ts and ts <= first), default=0)
            builder.groups[index].append(Message("system", line, 0, events[0].line))


def _add_to_result(group: list[Message], call_id: str, line: str, number: int) -> None:
    """``line`` (a subagent's work) at the end of the call's result in ``group``: a call has one
    result; a new one when the call has none (it was interrupted)."""
    for index in range(len(group) - 1, -1, -1):
        message = group[index]
        if message.role == "tool" and message.call_id == call_id:
            group[index] = replace(message, content=f"{message.content}\n\n[{line}]" if message.content else line)
            return
    group.append(Message("tool", line, 0, number, call_id=call_id))


def _spawns(builder: _Builder, call_id: str, started: str, first: str) -> bool:
    if not first or not started or started > first:
        return False
    ended = builder.results.get(call_id)
    group = builder.groups[builder.calls[call_id][0]]
    named = any(c.get("id") == call_id and c.get("name") in SUBAGENT_TOOLS for m in group for c in m.tool_calls)
    return named and (not ended or first <= ended)


def _chain_root(event: _Event, read: _Read) -> str:
    node, seen = event.uuid, set()
    while node is not None and read.parents.get(node) in read.parents and node not in seen:
        seen.add(node)
        node = read.parents[node]
    return node or f"line {event.line}"


def _sidechain_line(events: list[_Event]) -> str:
    tools = Counter(c["name"] for e in events for c in e.calls)
    used = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in tools.most_common()) or "none"
    said = next((e.text for e in reversed(events) if e.kind == "assistant" and e.text.strip()), "")
    said = " ".join(said.split())
    said = said if len(said) <= 200 else said[:199] + "…"
    count = f"{len(events)} event{'s' if len(events) != 1 else ''}"
    return f"subagent work (sidechain, {count}; tools: {used})" + (f": {said}" if said else "")


def _add_summaries(read: _Read, builder: _Builder) -> None:
    """Claude Code's ``summary`` events (titles of the conversation up to ``leafUuid``): a session
    note at the end of the round of the leaf (or of the nearest event before it that is in a
    round; the first round when the leaf's round was compacted away). A summary whose leaf is
    not a line of this file is left out: Claude Code writes the titles of other sessions (of
    this project or, in a shared folder, of another one) at a file's head, and none of them
    summarizes this conversation."""
    for event in read.events:
        if event.kind != "summary" or not builder.groups or (event.leaf or "") not in read.parents:
            continue
        note = Message("system", f"Claude Code's summary of the conversation so far: {event.text}", 0, event.line)
        index = _leaf_group(event.leaf, read, builder)
        if index is not None:
            builder.groups[index].append(note)
        else:
            builder.groups[0].insert(0, note)


def _leaf_group(leaf: str | None, read: _Read, builder: _Builder) -> int | None:
    """The round of ``leaf`` or of the nearest event before it (up its ``parentUuid`` chain) that
    is in one; None when none is."""
    seen: set[str] = set()
    while leaf is not None and leaf not in seen:
        if leaf in builder.uuid_group:
            return builder.uuid_group[leaf]
        seen.add(leaf)
        leaf = read.parents.get(leaf)
    return None


def parse_claude_code(text: str, path: str, options: Options | None = None, memo: Memo = NO_MEMO) -> SessionHistory:
    """The rounds of a Claude Code transcript (see the module docstring), with a warning per
    malformed line and per tool result whose call is not in the thread, and one note of the
    lines recorded in another folder (``options.cwds``); ``memo`` keeps the reading of each line.

    Like a JSON Lines log, only the newest :data:`~.session.MAX_LOG_LINES` lines are read and
    the newest :data:`~.session.MAX_ROUNDS` rounds kept (numbered as in the whole file past the
    round cap), each cap with one warning, and warnings about single lines capped per kind
    (:func:`~ctxengine.nodes.lib.quote.capped_warnings`)."""
    options = options or Options()
    read = _read(text, path, options, memo)
    off = _thread(read)
    builder = _Builder(options)
    for event in read.events:
        if not event.sidechain and event.line not in off and event.kind != "summary":
            builder.add(event)
    if builder.boundary is not None:
        builder.fold(builder.boundary.text + " (no summary recorded)", builder.boundary.line)
    if options.sidechains == "fold":
        _fold_sidechains(read, builder, off)
    _add_summaries(read, builder)
    groups = [g for g in builder.groups if g]
    skipped_rounds = max(0, len(groups) - MAX_ROUNDS)
    rounds = number_rounds(groups[skipped_rounds:], skipped_rounds + 1)
    caps = []
    if read.skipped:
        caps.append(lines_cap_warning(path, read.skipped))
    if skipped_rounds:
        caps.append(rounds_cap_warning(path, len(groups), rounds[0].lines[0] if rounds[0].lines else read.skipped + 1))
    if read.foreign:
        caps.append(f"{path}: {read.foreign} line{'s' if read.foreign != 1 else ''} recorded in another folder "
                    "(not this project) skipped")
    warnings = list(read.warnings)
    called = {c["id"] for r in rounds for m in r.messages for c in m.tool_calls}
    for round_ in rounds:
        for message in round_.messages:
            if message.role == "tool" and message.call_id not in called:
                warnings.append(f"{path}:{message.line}: tool result for call {message.call_id!r} has no matching "
                                "tool call in the thread (the transcript starts after it)")
    return SessionHistory(tuple(rounds), tuple(caps) + capped_warnings(warnings, source=path),
                          path, CLAUDE_CODE,
                          len(read.sessions) or (1 if rounds else 0), read.total_lines)

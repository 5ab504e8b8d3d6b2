"""Reading a Claude Code transcript's events: each line decoded once (through the memo), reduced
to what the rounds need (:class:`Event`); tool results capped (:func:`capped`)."""

from __future__ import annotations

import json
import pickle
import re
from dataclasses import astuple, dataclass, field
from typing import Any

from ...digest import digest16, text_digest
from ...memo import NO_MEMO, Memo
from ...regex import lazy_regex
from ..history import LINE, MAX_LOG_LINES, newest_lines_start
from .find import in_project, nonblank_lines

CLAUDE_CODE = "claude-code"
#: Tool names whose calls start a subagent (sidechain).
SUBAGENT_TOOLS = frozenset(("Task", "Agent"))
_NOTE_TAGS = ("local-command-stdout", "local-command-stderr", "bash-stdout", "bash-stderr", "task-notification")
_SKIP_TAGS = ("local-command-caveat",)
_TAG = lazy_regex(r"<([a-z-]+)>(.*?)</\1>", re.S)


@dataclass(frozen=True)
class Options:
    """How a transcript is read (the ``state.claudeCode.*`` keys)."""

    sidechains: str = "fold"  # fold | drop
    compacted: str = "fold"  # fold | keep
    result_max_lines: int = 40  # a tool result's lines past this: head and tail kept
    result_max_chars: int = 4000  # then its characters past this: head and tail kept
    call_max_chars: int = 600  # a tool call's input (JSON) past this is cut
    cwds: tuple[str, ...] = ()  # when set: only events recorded in these folders (or inside them) are read


@dataclass
class Event:
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
class Read:
    """What reading a transcript found: its events, every uuid's parent, its sessions, warnings and counts."""

    events: list[Event] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)  # every uuid in the file -> its parent
    sessions: set = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    total_lines: int = 0
    foreign: int = 0  # lines skipped as recorded in another folder (Options.cwds)
    skipped: int = 0  # the oldest lines, left out (past MAX_LOG_LINES)




def read_events(text: str, path: str, options: Options, memo: Memo = NO_MEMO) -> Read:
    """The newest :data:`~..history.MAX_LOG_LINES` lines read (:func:`_read_line`), each once
    while it stays the same line at the same place (kept by the ``memo``: a transcript that grew
    decodes its new lines only); ``skipped`` counts the older lines left out."""
    offset, skipped = newest_lines_start(text, MAX_LOG_LINES)
    read = Read(skipped=skipped, total_lines=skipped)
    where = pickle.dumps((CLAUDE_CODE, path, astuple(options)))  # once, not per line
    for number, raw in nonblank_lines(text, offset, skipped):
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


def _event_of(obj: dict, number: int, path: str, options: Options, warnings: list[str]) -> Event | None:
    kind = obj.get("type")
    if kind == "summary":
        summary = obj.get("summary")
        return Event(number, "summary", text=summary, leaf=obj.get("leafUuid")) if isinstance(summary, str) else None
    if kind == "system":
        if obj.get("subtype") == "compact_boundary":
            return Event(number, "boundary", text=str(obj.get("content") or "Conversation compacted"))
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


def _assistant(content: Any, number: int, message_id: Any, options: Options) -> Event:
    """An assistant message's event: its text blocks joined, its tool calls (:func:`_tool_call`)
    and the subagent tasks among them; thinking blocks (the model's scratch work) are dropped."""
    texts, calls, tasks = [], [], []
    for block in content if isinstance(content, list) else [content]:
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(block, str):
            texts.append(block)
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("tool_use", "server_tool_use"):
            call, task = _tool_call(block, f"L{number}.{len(calls) + 1}", options)
            calls.append(call)
            tasks.extend(task)
    return Event(number, "assistant", text="\n\n".join(t.strip() for t in texts if t.strip()), calls=tuple(calls),
                 message_id=message_id if isinstance(message_id, str) else None, tasks=tuple(tasks))


def _tool_call(block: dict, fallback_id: str, options: Options) -> tuple[dict, tuple]:
    """(the call as {"id", "name", "arguments"}, its (id, prompt key) when it starts a subagent
    with a ``prompt``, else nothing) of a ``tool_use`` block; its input as sorted JSON, cut."""
    arguments = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
    call = {"id": str(block.get("id") or fallback_id), "name": str(block.get("name") or "tool"),
            "arguments": _cut(arguments, options.call_max_chars)}
    prompt = block.get("input", {}).get("prompt") if isinstance(block.get("input"), dict) else None
    task = ((call["id"], prompt_key(prompt)),) if call["name"] in SUBAGENT_TOOLS and isinstance(prompt, str) else ()
    return call, task


def prompt_key(prompt: str) -> bytes:
    """What a subagent's first message and the ``prompt`` of the Task call that started it share:
    the digest of the text, its ends stripped (the full text is not kept)."""
    return text_digest(prompt.strip())


def _user(obj: dict, content: Any, number: int, options: Options) -> Event | None:
    if obj.get("isCompactSummary"):
        return Event(number, "compact", text=_plain_text(content))
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
        return Event(number, "results", text=text, results=tuple(results), agent_id=agent)
    if obj.get("isMeta"):
        return None  # caveats and injected skill text: not the user's words
    return _prompt_or_note(_plain_text(content), number)


def _prompt_or_note(text: str, number: int) -> Event | None:
    stripped = text.strip()
    if not stripped:
        return None
    tags = dict((m.group(1), m.group(2).strip()) for m in _TAG.finditer(stripped)) if stripped[0] == "<" else {}
    if any(tag in tags for tag in _SKIP_TAGS):
        return None
    if "command-name" in tags:
        return Event(number, "prompt", text=f"{tags['command-name']} {tags.get('command-args', '')}".strip())
    if "bash-input" in tags:
        return Event(number, "prompt", text="! " + tags["bash-input"])
    for tag in _NOTE_TAGS:
        if tag in tags:
            return Event(number, "note", text=f"{tag}: {tags[tag]}".strip())
    if stripped.startswith("[Request interrupted by user"):
        return Event(number, "note", text=stripped.strip("[]"))
    return Event(number, "prompt", text=text)


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

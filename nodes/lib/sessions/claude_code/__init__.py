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
- like a JSON Lines log (:mod:`..jsonl`), only the newest ``MAX_LOG_LINES`` lines are read
  and the newest ``MAX_ROUNDS`` rounds kept, each cap with one warning;
- a malformed line is a warning naming ``file:line`` (capped per kind as every build's warnings); the text is walked line by line and
  each event is reduced to what the rounds need as it is read (progress events keep only
  their ids), so a large transcript never holds more than its text and the kept parts.

``usage`` is not copied: Claude Code's usage counts the whole API call (the context sent
with it), not the message, so it would mislead the budget monitor.

The package's modules: find (where the transcripts are), events (reading a transcript's lines),
rounds (the thread and the rounds).
"""

from .events import CLAUDE_CODE, Options, capped
from .find import (config_dir, folder_name, head_cwd, in_project, is_claude_code, newest_transcript, project_folders,
                   project_paths, transcripts)
from .rounds import parse_claude_code

__all__ = ["CLAUDE_CODE", "Options", "capped", "config_dir", "folder_name", "head_cwd", "in_project", "is_claude_code",
           "newest_transcript", "parse_claude_code", "project_folders", "project_paths", "transcripts"]

"""Session transcripts: parse them into rounds, render rounds verbatim, summarise old rounds;
one module per transcript format and one per concern:

* history: what the formats share (SessionText, SessionHistory, the caps on what is read, numbering rounds)
* jsonl: the JSON Lines ``session.log``
* aider: aider's ``.aider.chat.history.md``
* claude_code: Claude Code's transcripts, a package (finding them, reading their events, the rounds)
* parse: a session file of any format (:func:`parse_session` detects it)
* render: rounds verbatim
* summary: one summary bullet per round
* compact: the older rounds summarised, the recent ones verbatim

A round is one user request and everything up to the next one. A tool call and its results are
one unit: rendering shows each result right under its call, and the one-line summary of a round
names a call only together with its result. Everything here is pure, deterministic and
line-oriented (no model call, no token counting), so the 4 MB aider transcript of the corpus
parses and compacts in a fraction of one tiktoken pass over it. The names other modules use are
re-exported here (``from ctxengine.nodes.lib import sessions``), but not the format parsers:
:func:`parse_session` imports the parser of the format it reads (aider's or the JSON Lines
one), so a project without such a transcript loads neither (docs/CONTRIBUTING-NODES.md,
"Imports deferred on purpose").
"""

from .compact import compact_history, history_trailer, verbatim_start
from .history import (AIDER, JSONL, MAX_LOG_LINES, MAX_ROUNDS, SessionHistory, SessionText, lines_cap_warning,
                      rounds_cap_warning, rounds_of, tool_units)
from .parse import parse_session
from .render import render_round, render_rounds
from .summary import round_summaries, round_summary, summarize_rounds

__all__ = ["AIDER", "JSONL", "MAX_LOG_LINES", "MAX_ROUNDS", "SessionHistory", "SessionText", "compact_history",
           "history_trailer", "lines_cap_warning", "parse_session",
           "render_round", "render_rounds", "round_summaries", "round_summary", "rounds_cap_warning", "rounds_of",
           "summarize_rounds", "tool_units", "verbatim_start"]

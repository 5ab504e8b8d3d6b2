"""``ctxengine serve``: the engine as a Model Context Protocol server over stdio.

An agent that shells out to ``ctxengine build`` pays the start-up (about 1 s) every turn; this
process starts once and keeps one warm driver (and the cache between runs, as the process
default says: ``serve --cache``) for its lifetime. Tools: ``build_context`` (the context text,
then a short JSON summary, also as structured content) and ``explain_config`` (every value with
its origin). A CtxEngineError comes back as a tool error carrying its message, an unexpected
exception as one line (its traceback goes to the server's stderr log); the server keeps serving.

Trust: the project path is an argument from the client, the user's own agent, as it is on the
command line; the project folder itself stays untrusted input (see README). The agent reads that
untrusted text and is not the user: ``trust.*`` (and ``state.claudeCode.transcript``) in a tool
call's overrides is a tool error unless the server was started with ``--allow-trust-overrides``,
and warnings and errors sent back say what was left out, not which setting would let it in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
import threading
from asyncio.streams import FlowControlMixin
from typing import Annotated, Any, Callable, Literal, TypeVar

from .options import MODES, PHASES, internal_error
from .version import __version__
from .nodes.lib.textio import without_widening_hints
from .nodes.types import CtxEngineError

#: How to install the server's dependency; named in the error when it is missing.
INSTALL_HINT = 'pip install "ctxengine[serve]"'

try:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.stdio import stdio_server
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent
    from pydantic import Field
    from typing_extensions import TypedDict  # pydantic needs it (not typing's) before Python 3.12
except ImportError as _exc:  # the optional extra is not installed (or mcp 1.x is)
    raise CtxEngineError(f"ctxengine serve needs the mcp package, version 2 or later ({_exc}); "
                         f"install it with: {INSTALL_HINT}") from None

_log = logging.getLogger("ctxengine.serve")
#: One build at a time: the shared driver and the cache bookkeeping are not made for threads.
#: The tools run on the event loop (a worker thread per call costs a few ms on a loaded machine),
#: so the client's calls queue; the lock holds them while the warm-up thread builds.
_BUILD_LOCK = threading.Lock()
#: The longest JSON-RPC message read (one line); a longer one is dropped with a warning.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_T = TypeVar("_T")

Project = Annotated[str, Field(description="the project folder, as an absolute path (a relative one is read "
                                           "from the server's working folder; ~ is expanded)")]
Request = Annotated[str, Field(description="the user request the context is for")]
Mode = Annotated[Literal[MODES] | None, Field(description="the mode template (config key 'template')")]
Phase = Annotated[Literal[PHASES] | None,
                  Field(description="GSD phase type: which .planning/ files load (disclosure.phase)")]
MaxTokens = Annotated[int | None, Field(description="the model's context window in tokens (budget.maxTokens)")]
Overrides = Annotated[dict[str, Any] | None,
                      Field(description='configuration overrides as dotted keys, e.g. {"budget.softLimit": 0.9}')]


class BuildSummary(TypedDict):
    """The short summary of one build (the structured content of ``build_context``)."""

    tokens: int
    available_tokens: int
    utilization: float
    over_budget: bool
    truncated: bool
    truncation_reason: str | None
    sections_changed: list[str]
    warnings: list[str]
    position: dict[str, Any]


class ConfigValue(TypedDict):
    key: str
    value: Any
    origin: str


class ConfigExplanation(TypedDict):
    """Every effective configuration value with the layer it came from, and the warnings."""

    values: list[ConfigValue]
    warnings: list[str]


#: Override keys that widen what a build may read: ``trust.*`` and a Claude Code transcript named
#: outside the project. An agent reads untrusted project text and is not the user, so a tool call
#: may not set them unless the server was started with ``--allow-trust-overrides``.
WIDENING_KEYS = ("trust", "state.claudeCode.transcript")


def dotted_keys(overrides: Any, prefix: str = "") -> list[str]:
    """Every key of ``overrides`` as the dotted key it sets (nested objects and dotted names alike:
    ``{"trust": {"allowedPaths": …}}`` and ``{"trust.allowedPaths": …}`` both give
    ``trust.allowedPaths``; an empty object gives its own key)."""
    if not isinstance(overrides, dict):
        return [prefix] if prefix else []
    keys: list[str] = []
    for key, value in overrides.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        keys.extend(dotted_keys(value, dotted) if isinstance(value, dict) and value else [dotted])
    return keys


def widening_keys(overrides: Any) -> list[str]:
    """The keys of ``overrides`` that would widen what a build may read (:data:`WIDENING_KEYS`)."""
    return [key for key in dotted_keys(overrides)
            if any(key == w or key.startswith(w + ".") or w.startswith(key + ".") for w in WIDENING_KEYS)]


class Tools:
    """The MCP tools, for one server: whether tool calls may set the trust keys is the server's
    (``serve --allow-trust-overrides``), never the agent's."""

    def __init__(self, allow_trust_overrides: bool = False):
        self.allow_trust_overrides = allow_trust_overrides

    def checked(self, overrides: Overrides) -> dict[str, Any]:
        """``overrides`` as given, or a tool error naming the keys that would widen trust."""
        refused = [] if self.allow_trust_overrides else widening_keys(overrides)
        if refused:
            raise ToolError(f"overrides: {', '.join(refused)} cannot be set from a tool call; what ctxengine may "
                            "read is the user's to decide, in their own configuration")
        return dict(overrides or {})

    async def build_context(self, project: Project, request: Request = "", mode: Mode = None, phase: Phase = None,
                            max_tokens: MaxTokens = None,
                            overrides: Overrides = None) -> Annotated[CallToolResult, BuildSummary]:
        """Assemble the context an LLM should see for one request against one project, cut to fit
        the token budget by priority. Returns the context text, then a JSON summary (tokens,
        utilization, truncation, warnings, GSD position)."""
        from . import api

        overrides = self.checked(overrides)
        result = _guarded(lambda: api.build_context(_folder(project), request, overrides=overrides,
                                                    mode=mode, phase=phase, max_tokens=max_tokens))
        summary = build_summary(result)
        return CallToolResult(content=[TextContent(type="text", text=result.context),
                                       TextContent(type="text", text=json.dumps(summary, ensure_ascii=False))],
                              structured_content=summary)

    async def explain_config(self, project: Project, mode: Mode = None, phase: Phase = None,
                             max_tokens: MaxTokens = None, overrides: Overrides = None) -> ConfigExplanation:
        """Every effective configuration value of a project with its origin (defaults, user config,
        the project's .planning/config.json, or the override), and the configuration warnings."""
        from . import api

        overrides = self.checked(overrides)
        rows, warnings = _guarded(lambda: api.explain_config(
            _folder(project), api.build_overrides(overrides, mode=mode, phase=phase, max_tokens=max_tokens)))
        return {"values": [{"key": key, "value": value, "origin": origin} for key, value, origin in rows],
                "warnings": [without_widening_hints(w) for w in warnings]}


def build_summary(result) -> BuildSummary:
    """The summary of a :class:`ctxengine.BuildResult` that ``build_context`` returns beside the text;
    its warnings say what was left out, not which setting would let it in."""
    truncation = result.truncation
    return {
        "tokens": result.budget.total_tokens,
        "available_tokens": result.budget.available_tokens,
        "utilization": result.budget.utilization_rate,
        "over_budget": result.budget.is_over_budget,
        "truncated": bool(truncation.get("triggered")),
        "truncation_reason": truncation.get("reason"),
        "sections_changed": list(truncation.get("sections_changed") or ()),
        "warnings": [without_widening_hints(w) for w in result.warnings],
        "position": dict(result.position),
    }


def make_server(debug: bool = False, allow_trust_overrides: bool = False) -> MCPServer:
    """The MCP server with the ctxengine tools (``debug``: INFO logs on stderr, else warnings only;
    ``allow_trust_overrides``: tool calls may set the trust keys, :data:`WIDENING_KEYS`)."""
    server = MCPServer("ctxengine", version=__version__, log_level="INFO" if debug else "WARNING",
                       instructions="Call build_context with the project folder and the user's request to get "
                                    "the context to work from (rules, plan, history, git changes), already fit "
                                    "to the token budget; explain_config shows where each setting comes from.")
    tools = Tools(allow_trust_overrides)
    server.add_tool(tools.build_context, structured_output=True)
    server.add_tool(tools.explain_config, structured_output=True)
    return server


def serve(debug: bool = False, allow_trust_overrides: bool = False) -> None:
    """Serve over stdin/stdout until the client closes stdin; the driver warms up meanwhile."""
    server = make_server(debug, allow_trust_overrides)
    threading.Thread(target=_warm_up, name="ctxengine-warm-up", daemon=True).start()
    anyio.run(_serve_stdio, server)


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport over asyncio pipes: no worker thread per line read or written
    (the SDK's file wrappers hop to one for each, 3-8 ms a call on a loaded machine). Falls back to
    the SDK's own when stdin or stdout is not a pipe (a file, a terminal) or the SDK changed."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # the SDK's own in-memory transport uses it too
    pipes = await _open_pipes() if lowlevel is not None else None
    if pipes is None:
        await server.run_stdio_async()
        return
    reader, writer, restore = pipes
    try:
        async with stdio_server(reader, writer) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        restore()


async def _open_pipes():
    """(line reader of stdin, writer of stdout, restore) with fd 0 at /dev/null and fd 1 at stderr
    meanwhile, as the SDK does, so children read nothing and stray output misses the wire; None
    when stdin or stdout is not a pipe."""
    if sys.platform == "win32" or not all(_is_pipe(fd) for fd in (0, 1)):
        return None
    import fcntl

    loop = asyncio.get_running_loop()
    wire_in, wire_out = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1))
    stream = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(wire_in, "rb"))
    transport, protocol = await loop.connect_write_pipe(FlowControlMixin, os.fdopen(wire_out, "wb"))
    saved = [os.dup(0), os.dup(1)]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    def restore() -> None:
        for fd, copy in enumerate(saved):
            os.dup2(copy, fd)
            os.close(copy)

    writer = _PipeWriter(asyncio.StreamWriter(transport, protocol, None, loop))
    return _LineReader(stream, writer.send_line), writer, restore


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _LineReader:
    """stdin's lines as text (what ``stdio_server`` iterates over). A line that is not JSON (or is
    too long to read) never reaches the SDK, which would drop it without a word and leave the
    client waiting: it is answered at once with a JSON-RPC parse error (:func:`parse_error_reply`)
    through ``reply``; blank lines are skipped."""

    def __init__(self, stream: asyncio.StreamReader, reply: Callable[[str], Any] | None = None):
        self._stream, self._reply = stream, reply

    def __aiter__(self) -> "_LineReader":
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._stream.readline()
            except ValueError:  # the stream dropped it
                _log.warning("a message longer than %d bytes was dropped", MAX_MESSAGE_BYTES)
                await self._answer(f"the message is longer than {MAX_MESSAGE_BYTES} bytes")
                continue
            if not line:
                raise StopAsyncIteration
            text = line.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            problem = json_problem(text)
            if problem is None:
                return text
            _log.warning("a message that is not JSON was answered with a parse error (%s)", problem)
            await self._answer(problem)

    async def _answer(self, problem: str) -> None:
        if self._reply is not None:
            await self._reply(parse_error_reply(problem))


def json_problem(text: str) -> str | None:
    """Why ``text`` (one message) is not JSON, or None when it is."""
    try:
        json.loads(text)
    except ValueError as exc:
        return f"not valid JSON ({getattr(exc, 'msg', exc)} at character {getattr(exc, 'pos', '?')})"
    except RecursionError:
        return "JSON nested too deeply to read"
    return None


def parse_error_reply(problem: str) -> str:
    """The JSON-RPC 2.0 answer to a message that could not be parsed: one line, error code
    -32700 and id null (the request's id is not known)."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {problem}"}}) + "\n"


class _PipeWriter:
    """stdout as ``stdio_server`` writes it: text, then a flush that waits for the pipe."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()

    async def send_line(self, line: str) -> None:
        """One whole line written and flushed (a reply the SDK does not make)."""
        await self.write(line)
        await self.flush()


def _warm_up() -> None:
    """Build the bundled demo (uncached) with its own model and with the default model, so the
    driver, the templates and both tokenizers (1-2 s each to load) are ready before the first
    call; a call that comes earlier waits for the build under way."""
    from . import api
    from .nodes.config import defaults

    for overrides in ({}, {"model": defaults()["model"]}):
        with _BUILD_LOCK:
            try:
                api.build_context(api.bundled_example(), "warm-up", overrides=overrides, cache=False)
            except Exception:  # noqa: BLE001 - the first call reports whatever is wrong
                _log.warning("warm-up build failed; the first call will load what it needs", exc_info=True)
                return


def _folder(project: str) -> str:
    """The project folder as an absolute path (so an error shows where it was looked for)."""
    if not project.strip():
        raise CtxEngineError("project: give the project folder, as an absolute path")
    return os.path.abspath(os.path.expanduser(project))


def _guarded(run: Callable[[], _T]) -> _T:
    """``run()`` under the build lock; a CtxEngineError becomes a ToolError with its message, anything
    else a one-line ToolError (with its traceback in the server's log). Hamilton logs no failure."""
    from .driver import quiet_failures

    with _BUILD_LOCK, quiet_failures():
        try:
            return run()
        except CtxEngineError as exc:
            raise ToolError(without_widening_hints(str(exc))) from None
        except Exception as exc:  # noqa: BLE001 - the server keeps serving
            _log.error("build failed", exc_info=True)
            raise ToolError(f"{internal_error(exc)} (the traceback is in the server's log)") from None

"""`ctxengine serve`: the MCP server, driven by the SDK's own client over stdio.

One server process (``python -m ctxengine serve``) serves the whole module: starting it costs
about 2 s, and a server that keeps serving after bad calls is part of what is tested.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import ctxengine
from ctxengine import cli
from conftest import write_project

REQUEST = "Fix the login endpoint: a bad password must return 401"
TOOLS = {"build_context", "explain_config"}


class _Client:
    """A synchronous face on one ClientSession that lives in a portal's event loop."""

    def __init__(self, portal, session: ClientSession, log: Path):
        self.portal, self.session, self.log = portal, session, log

    def call(self, tool: str, **arguments):
        return self.portal.call(self.session.call_tool, tool, arguments)

    def list_tools(self):
        return self.portal.call(self.session.list_tools)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """A live ``ctxengine serve`` started in a folder that holds the project ``proj``."""
    workdir = tmp_path_factory.mktemp("serve")
    write_project(workdir / "proj", {
        ".planning/config.json": {"budget": {"maxTokens": 8000}},
        ".planning/plans/current/plan.md": "# Plan\n\n- [ ] wire the serve command\n",
    })
    log = workdir / "server.log"
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxengine", "serve"],
                                   env=dict(os.environ), cwd=str(workdir))
    with open(log, "w") as errlog, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params, errlog=errlog)) as (read, write):
            with portal.wrap_async_context_manager(ClientSession(read, write)) as session:
                portal.call(session.initialize)
                yield _Client(portal, session, log)


def _text(result) -> str:
    return result.content[0].text


def test_lists_the_tools_with_their_arguments(client):
    tools = {tool.name: tool for tool in client.list_tools().tools}
    assert set(tools) == TOOLS
    build = tools["build_context"]
    assert build.input_schema["required"] == ["project"]
    assert {"project", "request", "mode", "phase", "max_tokens", "overrides"} == set(build.input_schema["properties"])
    assert build.input_schema["properties"]["mode"]["anyOf"][0]["enum"] == list(cli.MODES)
    assert {"tokens", "utilization", "truncated", "warnings", "position"} <= set(build.output_schema["properties"])
    assert tools["explain_config"].description.startswith("Every effective configuration value")


def test_builds_the_demo_as_the_api_does(client):
    demo = str(ctxengine.bundled_example())
    result = client.call("build_context", project=demo, request=REQUEST)
    assert not result.is_error, _text(result)
    expected = ctxengine.build_context(demo, REQUEST)
    assert _text(result) == expected.context
    summary = result.structured_content
    assert json.loads(result.content[1].text) == summary
    assert summary["tokens"] == expected.budget.total_tokens
    assert summary["available_tokens"] == expected.budget.available_tokens == 16000 - 3200  # the demo's config.json
    assert summary["utilization"] == expected.budget.utilization_rate
    assert summary["truncated"] is False and summary["over_budget"] is False
    assert summary["warnings"] == list(expected.warnings)


def test_bad_project_is_a_tool_error_and_the_server_keeps_serving(client, tmp_path):
    missing = tmp_path / "no-such-project"
    result = client.call("build_context", project=str(missing), request=REQUEST)
    assert result.is_error
    assert str(missing) in _text(result) and "does not exist" in _text(result)
    again = client.call("build_context", project=str(ctxengine.bundled_example()), request=REQUEST)
    assert not again.is_error and REQUEST in _text(again)
    assert "Traceback" not in client.log.read_text()  # a user's mistake is not a crash


def test_bad_values_are_tool_errors_naming_key_and_fix(client):
    demo = str(ctxengine.bundled_example())
    config = client.call("build_context", project=demo, overrides={"budget.maxTokens": "lots"})
    assert config.is_error and "budget.maxTokens" in _text(config) and "'lots'" in _text(config)
    budget = client.call("build_context", project=demo, request=REQUEST, max_tokens=300)
    assert budget.is_error and "do not fit" in _text(budget) and "short" in _text(budget)
    mode = client.call("build_context", project=demo, mode="poetry")
    assert mode.is_error and "'dev', 'research' or 'review'" in _text(mode)
    assert not client.call("explain_config", project=demo).is_error


def test_relative_project_is_read_from_the_server_folder(client):
    result = client.call("build_context", project="proj", request=REQUEST, mode="review")
    assert not result.is_error, _text(result)
    assert "wire the serve command" in _text(result)
    assert result.structured_content["available_tokens"] == 8000 - 1600


def test_gsd_phase_gives_the_position(client):
    gsd = str(ctxengine.bundled_example("gsd"))
    result = client.call("build_context", project=gsd, request="Continue", phase="execute")
    assert not result.is_error, _text(result)
    expected = ctxengine.build_context(gsd, "Continue", phase="execute")
    assert result.structured_content["position"] == json.loads(json.dumps(dict(expected.position)))
    assert result.structured_content["position"]


def test_explain_config_gives_every_value_with_its_origin(client):
    demo = ctxengine.bundled_example()
    result = client.call("explain_config", project=str(demo), max_tokens=5000, overrides={"budget.softLimit": 0.9})
    assert not result.is_error, _text(result)
    rows, warnings = ctxengine.explain_config(demo, {"budget.maxTokens": 5000, "budget.softLimit": 0.9})
    values = result.structured_content["values"]
    assert [[v["key"], v["value"], v["origin"]] for v in values] == json.loads(json.dumps(rows))
    by_key = {v["key"]: v for v in values}
    assert by_key["budget.maxTokens"]["value"] == 5000 and by_key["budget.maxTokens"]["origin"].startswith("override")
    assert by_key["budget.exactBand"]["origin"].startswith("defaults")
    assert by_key["template"]["origin"].endswith(".planning/config.json")  # the demo sets it
    assert result.structured_content["warnings"] == list(warnings)


def test_unexpected_error_is_one_line_and_not_a_crash():
    from mcp.server.mcpserver.exceptions import ToolError

    from ctxengine import serve

    with pytest.raises(ToolError, match=r"^internal error: ZeroDivisionError: division by zero \(the traceback"):
        serve._guarded(lambda: 1 / 0)
    with pytest.raises(ToolError, match=r"^project: give the project folder"):
        serve._guarded(lambda: serve._folder("  "))


def test_serve_without_mcp_says_how_to_install(monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # what Python does for a package that is not installed
    monkeypatch.delitem(sys.modules, "ctxengine.serve", raising=False)
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "ctxengine serve needs the mcp package" in err and 'pip install "ctxengine[serve]"' in err



def test_an_oversized_message_is_dropped_and_reading_goes_on(caplog):
    import asyncio

    from ctxengine import serve

    async def lines():
        stream = asyncio.StreamReader(limit=16)
        stream.feed_data(b"x" * 40 + b"\n" + b'{"id": 1}\n')
        stream.feed_eof()
        return [line async for line in serve._LineReader(stream)]

    assert asyncio.run(lines()) == ['{"id": 1}\n']
    assert "was dropped" in caplog.text

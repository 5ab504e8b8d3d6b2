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
from ctxengine.nodes.lib.textio import without_widening_hints

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
    assert summary["warnings"] == [without_widening_hints(w) for w in expected.warnings]  # no "add … to trust"


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
    assert result.structured_content["warnings"] == [without_widening_hints(w) for w in warnings]


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


# ----------------------------------------------------------------------------- the agent is not the user


SECRET = "SECRET-OUTSIDE-THE-PROJECT-5a1"


@pytest.fixture
def outside_rules(tmp_path) -> tuple[Path, Path]:
    """(a project whose rules name a file outside it that exists and one that does not, that
    outside folder holding the secret)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n{SECRET}\n")
    project = write_project(tmp_path / "proj", {
        ".planning/config.json": {"references": {"core": ["main.md"]}},
        ".planning/main.md": f"# Rules\n@{outside / 'secret.md'}\n@{outside / 'missing.md'}\n"})
    return project, outside


@pytest.mark.parametrize("overrides, key", [
    ({"trust.allowedPaths": ["/"]}, "trust.allowedPaths"),
    ({"trust": {"allowedPaths": "/", "allowPrivateUrls": True}}, "trust.allowedPaths, trust.allowPrivateUrls"),
    ({"trust": {}}, "trust"),
    ({"state": {"claudeCode": {"transcript": "/"}}}, "state.claudeCode.transcript"),
    ({"state.claudeCode": {"transcript": "/"}}, "state.claudeCode.transcript"),
])
def test_a_tool_call_cannot_widen_trust(client, outside_rules, overrides, key):
    project, outside = outside_rules
    for tool, extra in (("build_context", {"request": REQUEST}), ("explain_config", {})):
        result = client.call(tool, project=str(project), overrides=overrides, **extra)
        assert result.is_error, _text(result)
        assert f"overrides: {key} cannot be set from a tool call" in _text(result)
        assert SECRET not in _text(result)


def test_mcp_warnings_say_what_was_left_out_not_how_to_widen_trust(client, outside_rules):
    project, outside = outside_rules
    result = client.call("build_context", project=str(project), request=REQUEST)
    assert not result.is_error, _text(result)
    assert SECRET not in _text(result)
    sent = result.structured_content["warnings"]
    refused = [w for w in sent if "outside the project; not read" in w]
    assert len(refused) == 2, sent
    assert not [w for w in sent if "trust." in w or "--set" in w or "to allow" in w], sent
    # the same words for the file that is there and the one that is not
    assert refused[0].replace("secret.md", "X") == refused[1].replace("missing.md", "X").replace(":3:", ":2:")
    # the user at the command line keeps the hint
    cli_warnings = ctxengine.build_context(str(project), REQUEST, cache=False).warnings
    assert [w for w in cli_warnings if f"add {outside} to trust.allowedPaths" in w]


def test_the_server_started_with_the_flag_takes_trust_overrides(outside_rules):
    import asyncio

    from ctxengine import serve

    project, outside = outside_rules
    widened = {"trust.allowedPaths": [str(outside)]}
    result = asyncio.run(serve.Tools(allow_trust_overrides=True).build_context(str(project), REQUEST,
                                                                               overrides=widened))
    assert SECRET in result.content[0].text
    with pytest.raises(serve.ToolError, match=r"^overrides: trust.allowedPaths cannot be set from a tool call"):
        asyncio.run(serve.Tools().build_context(str(project), REQUEST, overrides=widened))
    assert cli._parser().parse_args(["serve", "--allow-trust-overrides"]).allow_trust_overrides is True
    assert cli._parser().parse_args(["serve"]).allow_trust_overrides is False


def test_widening_hints_are_taken_out_of_every_refusal():
    from ctxengine.nodes.lib.textio import without_widening_hints

    samples = {
        "x.md is outside the project; not read (add /a (b)/c to trust.allowedPaths in your user config or --set "
        "to allow it); left out of the plan": "x.md is outside the project; not read; left out of the plan",
        "git: p is inside the repository at /r, which is outside the project; it is not read (add /r to "
        "trust.allowedPaths to allow it)": "git: p is inside the repository at /r, which is outside the project; "
                                          "it is not read",
        "u: host h is not in trust.allowedHosts (a); not fetched (add it in your user config or --set to allow it)":
            "u: host h is not in trust.allowedHosts (a); not fetched",
        "u: h resolves to the private address 10.0.0.1; not fetched (set trust.allowPrivateUrls: true in your user "
        "config or --set to allow private addresses)": "u: h resolves to the private address 10.0.0.1; not fetched",
        "u: not fetched, the build's URL deadline trust.buildDeadline (20 s) is spent (raise it in your user config "
        "or --set)": "u: not fetched, the build's URL deadline trust.buildDeadline (20 s) is spent",
        "trust.allowedPaths in c.json is ignored: a project cannot widen what ctxengine reads; set it in "
        "~/.config/ctxengine/config.yaml or with --set": "trust.allowedPaths in c.json is ignored: a project "
                                                         "cannot widen what ctxengine reads",
    }
    for warning, expected in samples.items():
        assert without_widening_hints(warning) == expected


def test_a_line_that_is_not_json_gets_a_parse_error_reply():
    import asyncio

    from ctxengine import serve

    sent: list[str] = []

    async def reply(line: str) -> None:
        sent.append(line)

    async def lines():
        stream = asyncio.StreamReader(limit=64)
        stream.feed_data(b'{"jsonrpc": "2.0", "id": 1\n\n' + b"x" * 80 + b'\n{"id": 2}\n')
        stream.feed_eof()
        return [line async for line in serve._LineReader(stream, reply)]

    assert asyncio.run(lines()) == ['{"id": 2}\n']
    replies = [json.loads(line) for line in sent]
    assert [(r["jsonrpc"], r["id"], r["error"]["code"]) for r in replies] == [("2.0", None, -32700)] * 2
    assert "not valid JSON" in replies[0]["error"]["message"] and "longer than" in replies[1]["error"]["message"]


def test_the_live_server_answers_a_bad_line_with_a_parse_error(tmp_path):
    import subprocess

    server = subprocess.Popen([sys.executable, "-m", "ctxengine", "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        server.stdin.write(b"this is not json\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
    finally:
        server.kill()  # the answer is all this test waits for (not the warm-up build)
        server.wait(timeout=30)
    assert answer["id"] is None and answer["error"]["code"] == -32700

"""The CLI never loses output and never shows a traceback: the real command in a subprocess
against /dev/full, a closed pipe, Ctrl-C during a stalled URL fetch, a file size limit; plus
atomic writes, the missing-folder rule, batch failures, and the newcomer options."""

from __future__ import annotations

import argparse
import csv
import http.server
import io
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import DEMO, REPO, local_http_server, write_project

CLI = [sys.executable, "-m", "ctxengine"]
INTERRUPTED = "ctxengine: interrupted"


def _env() -> dict:
    return dict(os.environ, HAMILTON_AUTOLOAD_EXTENSIONS="0")


def _default_sigint() -> None:
    """In the child: Ctrl-C raises KeyboardInterrupt even when the test runner ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("capture_output", True)
    return subprocess.run([*CLI, *args], cwd=cwd, text=True, env=_env(), timeout=120, **kwargs)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# ----------------------------------------------------------------------------- stdout closed or full


def test_stdout_to_dev_full_is_one_line_and_exit_1():
    with open("/dev/full", "w") as full:
        done = run_cli("build", "--request", "x", stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert done.returncode == 1
    assert one_line(done.stderr) == "ctxengine: error: cannot write to stdout (No space left on device)"


def test_help_to_dev_full_is_one_line_and_exit_1():
    with open("/dev/full", "w") as full:
        done = run_cli("build", "--help", stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert done.returncode == 1
    assert "No space left on device" in one_line(done.stderr)


def test_closed_pipe_is_one_line_and_no_traceback():
    proc = subprocess.Popen([*CLI, "build", "--request", "x", "--format", "json"], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader went away before anything was written (like `| head -c 10`)
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert one_line(stderr) == "ctxengine: error: stdout was closed before all the output was written"


# ----------------------------------------------------------------------------- Ctrl-C


class _Stall(http.server.BaseHTTPRequestHandler):
    """Answers nothing until released: a build that fetches from it is busy until Ctrl-C."""

    started = threading.Event()
    release = threading.Event()

    def do_GET(self):  # noqa: N802
        type(self).started.set()
        type(self).release.wait(60)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/markdown")
            self.end_headers()
            self.wfile.write(b"# Late\n")
        except OSError:
            pass  # the client is gone

    def log_message(self, *args):
        pass


@pytest.fixture
def stalled_project(tmp_path):
    """(project whose reference URL stalls, the --set options that allow and wait for it)."""
    _Stall.started.clear()
    _Stall.release.clear()
    with local_http_server(_Stall) as url:
        project = write_project(tmp_path / "slow", {".planning/config.json": {"references": {"project": [f"{url}/doc.md"]}}})
        sets = ["--set", "trust.allowPrivateUrls=true", "--set", "references.urlTimeout=60",
                "--set", "trust.urlConnectTimeout=60", "--set", "trust.buildDeadline=60"]
        try:
            yield project, sets
        finally:
            _Stall.release.set()


def _interrupt_when_fetching(args: list[str]) -> tuple[int, str]:
    proc = subprocess.Popen([*CLI, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    try:
        assert _Stall.started.wait(90), "the CLI never fetched the stalled URL"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stderr


def test_ctrl_c_during_a_build_exits_130_with_one_line(stalled_project):
    project, sets = stalled_project
    code, stderr = _interrupt_when_fetching(["build", str(project), "--request", "x", *sets])
    assert code == 130
    assert one_line(stderr) == INTERRUPTED


def test_ctrl_c_during_a_batch_keeps_the_finished_rows(stalled_project, tmp_path):
    project, sets = stalled_project
    out = tmp_path / "runs.csv"
    code, stderr = _interrupt_when_fetching(["batch", str(DEMO), str(project), "--request", "x", *sets, "-o", str(out)])
    assert code == 130
    assert one_line(stderr) == INTERRUPTED
    rows = list(csv.DictReader(out.open()))
    assert [Path(r["project"]).name for r in rows] == ["demo"]
    assert rows[0]["error"] == "" and int(rows[0]["tokens_after"]) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "slow"]  # no temporary file left


# ----------------------------------------------------------------------------- atomic output, one folder rule


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_failed_write_leaves_the_old_output_intact(tmp_path):
    out = tmp_path / "out.json"
    assert run_cli("build", "--request", "x", "--format", "json", "-o", str(out)).returncode == 0
    old = out.read_bytes()
    assert len(old) > 2000
    done = run_cli("build", "--request", "y", "--format", "json", "-o", str(out), preexec_fn=_limit_file_size)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert str(out) in line and "File too large" in line and "the old file is unchanged" in line
    assert out.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("args", [
    ("build", "--request", "x", "-o", "{missing}/out.md"),
    ("build", "--request", "x", "--lineage", "{missing}/lineage.dot"),
    ("dag", "-o", "{missing}/dag.dot"),
    ("batch", str(DEMO), "--request", "x", "-o", "{missing}/runs.csv"),
])
def test_a_missing_output_folder_is_refused_the_same_everywhere(tmp_path, args):
    missing = tmp_path / "no" / "such"
    done = run_cli(*(a.format(missing=missing) for a in args))
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert f"the folder '{missing}' does not exist" in line and "create it first" in line
    assert not (tmp_path / "no").exists()


def test_the_output_writer_keeps_the_mode_and_cleans_up(tmp_path):
    from ctxengine.viz.output import output_file, write_output

    target = tmp_path / "out.txt"
    target.write_text("old")
    target.chmod(0o640)
    write_output(target, "new")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o640
    with pytest.raises(RuntimeError):
        with output_file(target) as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with pytest.raises(KeyboardInterrupt):
        with output_file(target, keep_on_interrupt=True) as fh:
            fh.write("row 1\n")
            raise KeyboardInterrupt
    assert target.read_text() == "row 1\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


#: Every output option, with the name its FIFO gets (the suffix picks the format).
OUTPUT_OPTIONS = [
    (("build", "--request", "x", "-o"), "context.md"),
    (("build", "--request", "x", "--lineage"), "lineage.svg"),
    (("build", "--request", "x", "--report"), "report.html"),
    (("report", "--request", "x", "-o"), "report.html"),
    (("dag", "-o"), "dag.svg"),
    (("batch", str(DEMO), "--request", "x", "-o"), "rows.csv"),
    (("experiment", str(DEMO), "--vary", "truncation.strategy=tail,head", "-o"), "results.csv"),
]


@pytest.mark.parametrize("args, name", OUTPUT_OPTIONS, ids=[" ".join(a[:1] + a[-1:]) for a, _ in OUTPUT_OPTIONS])
def test_every_output_option_writes_a_fifo_in_place(tmp_path, args, name, capsys):
    """The issue's `-o /dev/null` replaced the device: every output option writes a FIFO (made
    here, read by a thread as `cat FIFO` would) in place, and it is still a FIFO afterwards."""
    from ctxengine.cli import main

    fifo = tmp_path / name
    os.mkfifo(fifo)
    got: list = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert main([*args, str(fifo)]) == 0, capsys.readouterr().err
    reader.join(5)
    assert got and len(got[0]) > 100
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.skipif(os.geteuid() != 0, reason="os.mknod of a character device needs root")
def test_build_to_a_null_device_node_leaves_the_device(tmp_path, capsys):
    """The issue's exact case, on a node made under tmp_path (never the machine's /dev/null)."""
    from ctxengine.cli import main

    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    assert main(["build", "--request", "x", "-o", str(node), "--lineage", str(node)]) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(node).st_mode) and os.lstat(node).st_rdev == os.makedev(1, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


def test_a_dangling_symlink_output_is_refused_before_the_build(tmp_path, capsys):
    from ctxengine.cli import main

    link = tmp_path / "report.html"
    link.symlink_to(tmp_path / "gone" / "report.html")
    assert main(["build", "--request", "x", "--report", str(link)]) == 2
    err = capsys.readouterr().err
    assert "--report" in err and "dangling symlink" in err and "tokens" not in err  # no build ran
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def test_batch_resume_refuses_a_fifo(tmp_path, capsys):
    from ctxengine.cli import main

    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    assert main(["batch", str(DEMO), "--request", "x", "-o", str(fifo), "--resume"]) == 2
    assert "not a regular file" in capsys.readouterr().err


# ----------------------------------------------------------------------------- batch


def test_batch_with_a_broken_project_exits_1_with_a_summary(tmp_path):
    broken = write_project(tmp_path / "broken", {".planning/config.json": "{not json"})
    done = run_cli("batch", str(DEMO), str(broken), "--request", "x")
    assert done.returncode == 1
    assert one_line(done.stderr) == "ctxengine: 1 of 2 projects failed (the error column says why)"
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [Path(r["project"]).name for r in rows] == ["demo", "broken"]
    assert rows[0]["error"] == ""
    assert rows[1]["error"].startswith("ConfigError: ") and "config.json:1:" in rows[1]["error"]


def test_batch_all_good_exits_0():
    done = run_cli("batch", str(DEMO), "--request", "x")
    assert done.returncode == 0, done.stderr
    assert one_line(done.stderr) == "ctxengine: 1 projects built"


# ----------------------------------------------------------------------------- errors and --debug


def test_bad_config_has_a_traceback_only_with_debug(tmp_path):
    project = write_project(tmp_path, {".planning/config.json": {"budget": {"maxTokens": "many"}}})
    plain = run_cli("build", str(project), "--request", "x")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr and "budget.maxTokens" in plain.stderr
    debug = run_cli("--debug", "build", str(project), "--request", "x")
    assert debug.returncode == 2 and "Traceback" in debug.stderr
    after = run_cli("build", "--debug", str(project), "--request", "x")  # --debug after the command too
    assert after.returncode == 2 and "Traceback" in after.stderr


def test_an_unexpected_error_is_one_line_unless_debug(monkeypatch, capsys):
    # every input we know of is validated now, so the bug is planted: the build handler raises
    from ctxengine import cli

    def broken(args):
        raise RuntimeError("planted bug " + "x" * 5000)

    monkeypatch.setattr(cli, "_build", broken)
    assert cli.main(["build", "--request", "x"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("ctxengine: internal error: RuntimeError: planted bug")
    assert line.endswith("(run with --debug for the traceback)") and len(line) < 1000  # cut, not 5,000 x's
    assert cli.main(["--debug", "build", "--request", "x"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_api_wrong_types_name_the_argument():
    import ctxengine

    with pytest.raises(TypeError, match=r"^request must be str, not NoneType"):
        ctxengine.build_context(DEMO, None)
    with pytest.raises(TypeError, match=r"^project_dir must be str or PathLike or None, not int"):
        ctxengine.build_context(3, "x")
    with pytest.raises(TypeError, match=r"^overrides must be Mapping or None, not list"):
        ctxengine.build_context(DEMO, "x", overrides=[("budget.maxTokens", 1)])


# ----------------------------------------------------------------------------- newcomer polish


def test_version_comes_from_the_package_metadata():
    from importlib import metadata

    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ctxengine {metadata.version('ctxengine')}"


def test_every_option_of_every_command_has_help():
    from ctxengine.cli import _parser

    missing = []
    parsers = [("ctxengine", _parser())]
    while parsers:
        name, parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_an_empty_request_is_a_warning():
    done = run_cli("build")
    assert done.returncode == 0
    assert ("ctxengine: warning: no request given: the context has no user request; "
            "use --request TEXT or --request-file FILE") in done.stderr.splitlines()
    assert "no request given" not in run_cli("build", "--request", "x").stderr


def test_config_explain_is_in_aligned_columns():
    done = run_cli("config", "--explain", "--set", "budget.softLimit=0.7")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["KEY", "VALUE", "ORIGIN"]
    value_at, origin_at = header.index("VALUE"), header.index("ORIGIN")
    assert len(rows) > 40
    for row in rows:
        assert row[value_at - 2:value_at] == "  " and row[value_at] != " ", row
        assert row[origin_at - 2:origin_at] == "  " and row[origin_at] != " ", row
    by_key = {row.split()[0]: row for row in rows}
    assert by_key["budget.softLimit"][origin_at:] == "override (--set)"
    assert by_key["outputInstructions"][value_at:origin_at].rstrip().endswith("...")


def test_phase_number_is_an_override_named_in_the_provenance():
    done = run_cli("config", "--explain", "--phase-number", "12", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {row["key"]: row for row in json.loads(done.stdout)}
    assert rows["state.gsdPhase"]["value"] == "12"
    assert rows["state.gsdPhase"]["origin"] == "override (--phase-number)"
    bad = run_cli("build", "--phase-number", "twelve")
    assert bad.returncode == 2 and "is not a phase number" in bad.stderr


def test_example_names_the_choices_and_excludes_a_project_dir(tmp_path):
    done = run_cli("build", "--request", "x", "--example", "nosuch")
    assert done.returncode == 2
    assert "--example 'nosuch'" in one_line(done.stderr) and "choose one of: demo" in done.stderr
    both = run_cli("build", str(tmp_path), "--request", "x", "--example", "demo")
    assert both.returncode == 2 and "not both" in both.stderr
    demo = run_cli("build", "--request", "x", "--example", "demo")
    assert demo.returncode == 0 and demo.stdout == run_cli("build", "--request", "x").stdout


def test_example_gsd_builds():
    if not (REPO / "examples" / "gsd").is_dir():
        pytest.skip("examples/gsd is not in this checkout yet (another branch adds it)")
    done = run_cli("build", "--example", "gsd", "--request", "What is the next task?")
    assert done.returncode == 0, done.stderr
    assert "# User Request" in done.stdout


# ----------------------------------------------------------------------------- the request


def _main_error(args: list[str], capsys) -> tuple[int, str]:
    from ctxengine.cli import main

    code = main(args)
    return code, one_line(capsys.readouterr().err)


def test_a_fifo_request_file_is_refused_at_once(tmp_path, capsys):
    """A FIFO nobody writes to hung the build; it is refused like any input that is not a file."""
    fifo = tmp_path / "request"
    os.mkfifo(fifo)
    code, line = _main_error(["build", "--request-file", str(fifo)], capsys)
    assert code == 2 and line == (f"ctxengine: error: --request-file '{fifo}' is a FIFO, not a regular file; "
                                  "give a regular file, or - to read stdin")


@pytest.mark.skipif(os.geteuid() != 0, reason="os.mknod of a character device needs root")
def test_a_zero_device_request_file_is_refused(tmp_path, capsys):
    """`--request-file /dev/zero` grew without limit: a zero node made under tmp_path is refused unread."""
    node = tmp_path / "zero"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    code, line = _main_error(["build", "--request-file", str(node)], capsys)
    assert code == 2 and "--request-file" in line and "is a character device, not a regular file" in line


def test_a_request_file_over_the_cap_is_refused_unread(tmp_path, capsys):
    from ctxengine.nodes.lib.textio import DEFAULT_MAX_FILE_BYTES

    big = tmp_path / "request.txt"
    with open(big, "wb") as fh:  # sparse: nothing is written, the size says it all
        fh.truncate(DEFAULT_MAX_FILE_BYTES + 1)
    code, line = _main_error(["build", "--request-file", str(big)], capsys)
    assert code == 2 and f"over the {DEFAULT_MAX_FILE_BYTES}-byte cap of a request" in line


def test_a_request_on_stdin_over_the_cap_is_refused(monkeypatch, capsys):
    from ctxengine.nodes.lib.textio import DEFAULT_MAX_FILE_BYTES

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * (DEFAULT_MAX_FILE_BYTES + 10))))
    code, line = _main_error(["build", "--request-file", "-"], capsys)
    assert code == 2 and "--request-file '-': stdin holds more than" in line


@pytest.mark.parametrize("request_text, what", [("fix\0it", "a NUL byte at character 4 of 6"),
                                                ("fix\udcffit", "a lone surrogate U+DCFF (not UTF-8 text) at character 4 of 6")])
def test_a_nul_or_a_lone_surrogate_in_the_request_is_named(tmp_path, capsys, request_text, what):
    code, line = _main_error(["build", "--request", request_text], capsys)
    assert code == 2 and line.startswith(f"ctxengine: error: --request has {what}; ")
    (tmp_path / "req.txt").write_bytes(b"x" * 9000 + b"\0")  # past the binary probe: the request check names it
    code, line = _main_error(["build", "--request-file", str(tmp_path / "req.txt")], capsys)
    assert code == 2 and "--request-file" in line and "a NUL byte at character 9,001 of 9,001" in line
    import ctxengine

    with pytest.raises(ctxengine.CtxEngineError, match="^" + re.escape(f"request has {what}")):
        ctxengine.build_context(request=request_text)


def test_batch_rows_name_a_nul_or_a_surrogate_in_their_request(tmp_path):
    from ctxengine.batch import run_jobs
    from ctxengine.batch_io import read_job_list

    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"project": str(DEMO), "request": "a\0b"}) + "\n"
                    + json.dumps({"project": str(DEMO), "request": "a\ud800b"}) + "\n"
                    + json.dumps({"project": str(DEMO), "request": "fine"}) + "\n", encoding="utf-8")
    rows = list(run_jobs(read_job_list(jobs), contexts_dir=str(tmp_path)))
    assert [row["status"] for row in rows] == ["error", "error", "ok"]
    assert rows[0]["error"].startswith("CtxEngineError: request has a NUL byte at character 2")
    assert rows[1]["error"].startswith("CtxEngineError: request has a lone surrogate U+D800")


# ----------------------------------------------------------------------------- odd file names drawn

#: Names git quotes in its output: a trailing backslash, a double quote, a newline, a tab, \l.
ODD_NAMES = ("ends with\\", 'say "hi"', "two\nlines", "tab\there", "left\\l")


def _dot_labels(source: str) -> list[str]:
    """The labels of a DOT text as dot reads them: a quoted string to its first unescaped quote,
    then its escapes (\\n a newline, \\x the character x)."""
    quoted_labels = re.findall(r'\blabel="((?:[^"\\]|\\.)*)"', source, flags=re.S)
    return [re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], text, flags=re.S) for text in quoted_labels]


def test_modified_files_with_odd_names_are_drawn_in_report_and_lineage(tmp_path, capsys):
    """A tracked, modified file whose name ends in a backslash made report and --lineage fail
    with "internal error" (its label escaped the closing quote of the DOT string)."""
    import warnings

    import graphviz

    from ctxengine.cli import main

    repo = tmp_path / "repo"
    write_project(repo, {".planning/config.json": "{}", **{name: "one\n" for name in ODD_NAMES}})
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "odd names"], check=True)
    for name in ODD_NAMES:
        (repo / name).write_text("one\ntwo\n")
    out = tmp_path / "out"
    out.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error", graphviz.DotSyntaxWarning)
        code = main(["build", str(repo), "--request", "x", "--no-cache", "-o", str(out / "context.md"),
                     "--lineage", str(out / "lineage.dot"), "--report", str(out / "report.html")])
    assert code == 0, capsys.readouterr().err
    assert "internal error" not in capsys.readouterr().err
    context = (out / "context.md").read_text()
    assert all(name.split("\n")[0] in context for name in ODD_NAMES)  # the git section has them
    labels = _dot_labels((out / "lineage.dot").read_text())
    for name in ODD_NAMES:  # each name comes back exactly as dot reads the label
        assert any(label.startswith(f"file: {name}") for label in labels), (name, labels)
    page = (out / "report.html").read_text()
    assert "ends with\\" in page and "say &quot;hi&quot;" in page
    if shutil.which("dot"):  # CI: the report's lineage was drawn by dot, not listed after a failure
        assert '<div class="lineage"><svg' in page


# ----------------------------------------------------------------------------- warnings capped


def test_warnings_are_capped_per_kind_in_one_pass():
    from ctxengine.nodes.lib.quote import WARNINGS_PER_KIND, capped_warnings

    bad = [f"session.log:{n}: malformed JSON line skipped" for n in range(1, 50_001)]
    other = [f"plans/{n}.md: unknown key 'k{n}'" for n in range(3)]
    capped = capped_warnings([*bad[:2], *other, *bad[2:], bad[0]])  # a repeat counts once
    assert capped == (*bad[:2], *other, *bad[2:WARNINGS_PER_KIND],
                      f"... and {50_000 - WARNINGS_PER_KIND:,} more like this")


def test_a_session_log_of_bad_lines_gives_a_bounded_warning_list(tmp_path, capsys):
    """The JSON (and so the MCP reply, which lists the same result's warnings) and stderr hold a
    few warnings of each kind, not one per bad line."""
    from ctxengine.cli import main

    project = write_project(tmp_path / "p", {".planning/sessions/current/session.log":
                                             "".join(f"{{not json {n}\n" for n in range(3000))})
    out = tmp_path / "result.json"
    assert main(["build", str(project), "--request", "x", "--format", "json", "-o", str(out)]) == 0
    warnings = json.loads(out.read_text())["warnings"]
    malformed = [w for w in warnings if "malformed JSON line" in w]
    log = str(project / ".planning/sessions/current/session.log")
    assert len(malformed) == 5 and f"{log}: ... and 2,995 more like this" in warnings and len(warnings) < 20
    assert main(["build", str(project), "--request", "x", "-o", str(tmp_path / "c.md")]) == 0
    assert len([line for line in capsys.readouterr().err.splitlines() if "warning:" in line]) < 40

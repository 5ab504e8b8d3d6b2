"""The trust model for reads and URLs: each attack of issue 9 against real files, real
symlinks and FIFOs, a real git repository, real local servers (http.server and a raw socket
that drips bytes) and the real Hamilton driver. Every attack asserts that the secret does not
reach the context and that a warning names the file and the setting that would allow it."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from hypothesis import given, settings, strategies as st

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import local_http_server, write_project  # noqa: E402

import ctxengine  # noqa: E402
from ctxengine.nodes import state as state_nodes  # noqa: E402
from ctxengine.nodes.lib import textio  # noqa: E402
from ctxengine.nodes.lib.textio import clean as textio_clean  # noqa: E402
from ctxengine.nodes.lib.textio import Refused, TextUnavailable, Trust  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

SECRET = "SECRET-MARKER-7f3a"
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}
HAS_MKFIFO = hasattr(os, "mkfifo")


def build(project: Path, request: str = "Fix the bug", **overrides):
    settings = {**QUIET, **overrides}
    return ctxengine.build_context(str(project), request, overrides=settings)


def rules_project(root: Path, main: str, extra: dict | None = None) -> Path:
    """A project whose references.core is .planning/main.md (the immutable System Reference)."""
    return write_project(root, {
        ".planning/config.json": {"references": {"core": ["main.md"]}},
        ".planning/main.md": main,
        **(extra or {}),
    })


def secret_file(folder: Path, name: str = "secret.md") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"# Secret\n{SECRET}\n", encoding="utf-8")
    return path


def assert_refused(result, *needles: str) -> str:
    assert SECRET not in result.context
    found = [w for w in result.warnings if all(n in w for n in needles)]
    assert found, (needles, result.warnings)
    return found[0]


# ----------------------------------------------------------------------------- local files


def test_an_absolute_path_outside_the_project_is_refused_with_the_setting(tmp_path):
    outside = secret_file(tmp_path / "elsewhere")
    project = rules_project(tmp_path / "proj", f"# Rules\n@/etc/passwd\n@{outside}\n")
    result = build(project)
    assert "root:" not in result.context
    assert_refused(result, ".planning/main.md:2: @/etc/passwd", "outside the project",
                   "add /etc to trust.allowedPaths in your user config or --set")
    assert_refused(result, ".planning/main.md:3:", str(outside), f"add {outside.parent} to trust.allowedPaths")


def test_allowed_paths_widen_the_rule(tmp_path):
    outside = secret_file(tmp_path / "shared-rules")
    project = rules_project(tmp_path / "proj", f"# Rules\n@{outside}\n")
    result = build(project, **{"trust.allowedPaths": [str(tmp_path / "shared-rules")]})
    assert SECRET in result.context
    assert not [w for w in result.warnings if "trust.allowedPaths" in w]


def test_a_home_path_is_expanded_and_checked(tmp_path, monkeypatch):
    home = tmp_path / "home"
    secret_file(home / ".ssh", "id_rsa")
    monkeypatch.setenv("HOME", str(home))
    project = rules_project(tmp_path / "proj", "# Rules\n@~/.ssh/id_rsa\n")
    result = build(project)
    assert_refused(result, ".planning/main.md:2: @~/.ssh/id_rsa", f"add {home / '.ssh'} to trust.allowedPaths")
    widened = build(project, **{"trust.allowedPaths": ["~/.ssh"]})
    assert SECRET in widened.context


def test_a_dot_dot_escape_is_refused(tmp_path):
    secret_file(tmp_path / "outside")
    project = rules_project(tmp_path / "proj", "# Rules\n@../../outside/secret.md\n@../../../../../../etc/passwd\n")
    result = build(project)
    assert "root:" not in result.context
    assert_refused(result, ".planning/main.md:2:", "outside the project", "trust.allowedPaths")
    assert_refused(result, ".planning/main.md:3:", "/etc/passwd", "trust.allowedPaths")


def test_a_committed_symlink_to_outside_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    key = secret_file(home / ".ssh", "id_rsa")
    project = tmp_path / "proj"
    write_project(project, {".planning/config.json": {"references": {"core": ["security.md"]}}, "README.md": "x\n"})
    (project / ".planning" / "security.md").symlink_to(key)
    (project / ".planning" / "references").mkdir()
    (project / ".planning" / "references" / "keys.md").symlink_to(key)  # a disclosure candidate too
    git = lambda *a: subprocess.run(["git", *a], cwd=project, check=True, capture_output=True)  # noqa: E731
    git("-c", "init.defaultBranch=main", "init", "-q")
    git("-c", "user.name=T", "-c", "user.email=t@example.com", "add", "-A")
    git("-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "links")
    assert git("ls-files", "-s", ".planning/security.md").stdout.startswith(b"120000")  # committed as a symlink
    result = build(project, "Review the security keys", mode="review", **{"state.includeGit": True})
    warning = assert_refused(result, "references.core[0] 'security.md'", str(key), "trust.allowedPaths")
    assert "outside the project" in warning
    assert_refused(result, ".planning/references/keys.md", "trust.allowedPaths")


def test_a_refusal_names_where_the_link_leaves_the_project_not_what_is_beyond(tmp_path):
    """A project link to an outside path that is itself a link (to a secret) and one to a path
    that does not exist are refused alike: each names the path where it leaves the project, never
    the outside link's target (which would tell that the outside link exists and where it goes).
    The project's own links, and a project named through the user's link, are still followed."""
    outside = tmp_path / "outside"
    key = secret_file(outside / "private", "id_rsa")
    (outside / "handy").symlink_to(key)  # the user's own link, outside the project
    project = rules_project(tmp_path / "proj", "# Rules\n@docs/a.md\n@docs/b.md\n")
    (project / ".planning" / "docs").mkdir()
    (project / ".planning" / "docs" / "a.md").symlink_to(outside / "handy")
    (project / ".planning" / "docs" / "b.md").symlink_to(outside / "nothing")
    (project / ".planning" / "via").symlink_to("docs")  # the project's own link: followed
    (tmp_path / "named").symlink_to(project)
    for root, main in ((project, None), (tmp_path / "named", "# Rules\n@via/a.md\n@via/b.md\n")):
        if main:
            (project / ".planning" / "main.md").write_text(main)
        result = build(root)
        assert SECRET not in result.context
        assert not [w for w in result.warnings if "private" in w or "id_rsa" in w], result.warnings
        refused = [w.split(": ", 2)[2] for w in result.warnings if w.startswith(".planning/main.md:")]
        assert len(refused) == 2 and str(outside / "handy") in refused[0], result.warnings
        assert refused[0].replace("handy", "X") == refused[1].replace("nothing", "X"), refused


def test_a_symlink_loop_says_so(tmp_path):
    project = rules_project(tmp_path / "proj", "# Rules\n@loop.md\n")
    (project / ".planning" / "loop.md").symlink_to("loop.md")
    result = build(project)
    assert [w for w in result.warnings if w.startswith(".planning/main.md:2: @loop.md") and "symlink loop" in w]
    assert not [w for w in result.warnings if "file not found" in w]


def test_a_context_template_outside_the_project_is_refused(tmp_path):
    outside = tmp_path / "tpl"
    outside.mkdir()
    (outside / "evil.md").write_text(f"{SECRET}\n{{{{{{userRequest}}}}}}\n", encoding="utf-8")
    project = rules_project(tmp_path / "proj", "# Rules\nBe careful.\n")
    result = build(project, contextTemplate=str(outside / "evil.md"))
    assert_refused(result, "contextTemplate", "outside the project", f"add {outside} to trust.allowedPaths",
                   "built-in context template")
    assert "# System Reference" in result.context  # the built-in template
    shadow = build(project, contextTemplate="/etc/shadow")
    assert_refused(shadow, "contextTemplate '/etc/shadow'", "trust.allowedPaths")
    widened = build(project, contextTemplate=str(outside / "evil.md"),
                    **{"trust.allowedPaths": [str(outside)], "truncation.requiredSections": []})
    assert SECRET in widened.context


def test_a_template_over_the_cap_is_an_error_naming_the_cap(tmp_path):
    project = rules_project(tmp_path / "proj", "# Rules\n", {".planning/big.md": "{{{userRequest}}}\n" * 500})
    with pytest.raises(ConfigError, match=r"big.md.*over references.maxFileBytes \(1000\); not loaded"):
        build(project, contextTemplate="big.md", **{"references.maxFileBytes": 1000})


def test_a_plan_file_linked_outside_is_left_out_with_a_warning(tmp_path):
    outside = secret_file(tmp_path / "outside", "plan.md")
    project = write_project(tmp_path / "proj", {"README.md": "x\n"})
    (project / ".planning" / "plans" / "current").mkdir(parents=True)
    (project / ".planning" / "plans" / "current" / "plan.md").symlink_to(outside)
    result = build(project)
    assert_refused(result, ".planning/plans/current/plan.md resolves to", "trust.allowedPaths",
                   "left out of the plan and history")


def test_a_device_is_not_read(tmp_path):
    project = rules_project(tmp_path / "proj", "# Rules\n@/dev/zero\n@/dev/null\n")
    refused = build(project)
    assert_refused(refused, ".planning/main.md:2: @/dev/zero", "add /dev to trust.allowedPaths")
    allowed = build(project, **{"trust.allowedPaths": ["/dev"]})
    assert_refused(allowed, ".planning/main.md:2: @/dev/zero", "a character device, not a regular file; skipped")
    assert_refused(allowed, ".planning/main.md:3: @/dev/null", "a character device")


_FIFO_BUILD = """
import sys, ctxengine
result = ctxengine.build_context(sys.argv[1], "Fix the bug", overrides={"state.includeGit": False})
print("\\n".join(result.warnings))
print("BUILT", len(result.context))
"""


@pytest.mark.skipif(not HAS_MKFIFO, reason="no FIFOs on this system")
def test_fifos_under_planning_do_not_block_the_build(tmp_path):
    project = write_project(tmp_path / "proj", {
        ".planning/config.json": {"references": {"core": ["main.md"]}},
        ".planning/main.md": "# Rules\n@pipe.md\n",
        ".planning/STATE.md": "# State\n\n## Current Position\n\nPhase: 1 of 2 (Core)\nPlan: 1 of 2\n",
        ".planning/ROADMAP.md": "# Roadmap\n\n## Phase 1: Core\n",
        ".planning/phases/01-core/01-01-PLAN.md": "<objective>\nBuild it.\n</objective>\n",
    })
    for fifo in (".planning/pipe.md", ".planning/references/unreferenced.md", ".planning/phases/01-core/01-02-PLAN.md"):
        (project / fifo).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(project / fifo)
    # a FIFO blocks open() forever: run the build in a child process with a timeout guard
    done = subprocess.run([sys.executable, "-c", _FIFO_BUILD, str(project)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "BUILT" in done.stdout
    assert ".planning/main.md:2: @pipe.md: .planning/pipe.md is a FIFO, not a regular file; skipped" in done.stdout
    assert ".planning/references/unreferenced.md is a FIFO, not a regular file; skipped" in done.stdout
    assert ".planning/phases/01-core/01-02-PLAN.md is a FIFO" in done.stdout


def test_a_real_path_given_by_the_caller_is_checked_against_the_trust_rules_too(tmp_path):
    """read_local_text(real=...) (a caller that resolved each folder once) still refuses a real
    path outside the trusted folders, naming the setting (it once raised a TypeError instead)."""
    project = tmp_path / "proj"
    project.mkdir()
    secret = secret_file(tmp_path / "outside")
    trust = Trust(str(project.resolve()))
    with pytest.raises(Refused, match="outside the project.*trust.allowedPaths"):
        textio.read_local_text(str(project / "link.md"), trust, real=str(secret.resolve()))
    inside = project / "notes.md"
    inside.write_text("kept\n")
    assert textio.read_local_text(str(inside), trust, real=str(inside.resolve())).text == "kept\n"


def test_the_configs_folder_is_found_without_importlib_resources_too(monkeypatch):
    """The fallback when ``importlib.resources`` cannot name the configs package: the folder next
    to the package, found from the module's own path (which moved when textio became a package)."""
    from ctxengine.nodes.lib.textio import trust as trust_rules

    def no_resources(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(trust_rules.resources, "files", no_resources)
    folder = trust_rules._configs_folder.__wrapped__()
    assert os.path.isfile(os.path.join(folder, "defaults.yaml")), folder


def test_a_symlinked_folder_outside_is_not_listed_or_read(tmp_path):
    outside = tmp_path / "outside"
    secret_file(outside, "review-checklist.md")
    project = write_project(tmp_path / "proj", {".planning/references/local.md": "# Local\n"})
    (project / ".planning" / "references" / "ext").symlink_to(outside, target_is_directory=True)
    names, _ = textio.list_files(str(project / ".planning"), Trust(str(project.resolve())), 100)
    assert names == ["references/local.md"]
    result = build(project, "Review this change", mode="review")
    assert SECRET not in result.context
    (tmp_path / "proj2").mkdir()
    (tmp_path / "proj2" / ".planning").symlink_to(outside, target_is_directory=True)
    names, warnings = textio.list_files(str(tmp_path / "proj2" / ".planning"), Trust(str((tmp_path / "proj2").resolve())), 100)
    assert names == [] and "trust.allowedPaths" in warnings[0]


def test_a_configured_reference_outside_is_a_warning_not_an_error(tmp_path):
    outside = secret_file(tmp_path / "elsewhere")
    project = write_project(tmp_path / "proj", {".planning/config.json": {"references": {"project": [str(outside)]}}})
    result = build(project)
    assert_refused(result, f"references.project[0] '{outside}'", "trust.allowedPaths")


# ----------------------------------------------------------------------------- cleaning and caps


def test_nul_and_ansi_escapes_are_removed_and_counted(tmp_path):
    body = "# Security\n" + "a" * 9000 + "\n\x1b[31mred\x1b[0m text\x07 with\x00 nul\x1b]0;title\x07 and\ttab\n"
    project = rules_project(tmp_path / "proj", "# Rules\n@security.md\n", {".planning/security.md": body})
    result = build(project)
    assert "red text with nul and\ttab" in result.context
    assert not any(c in result.context for c in "\x1b\x00\x07")
    assert ".planning/security.md: removed 5 control characters (NUL, ANSI escapes and the like)" in result.warnings


def test_a_url_body_is_cleaned_too(tmp_path):
    with local_http_server(_handler({"/doc.md": (200, {}, b"# Doc\n\x1b[1mbold\x1b[0m\n")})) as url:
        project = rules_project(tmp_path / "proj", f"# Rules\n@{url}/doc.md\n")
        result = build(project, **{"trust.allowPrivateUrls": True})
    assert "bold" in result.context and "\x1b" not in result.context
    assert f"{url}/doc.md: removed 2 control characters (NUL, ANSI escapes and the like)" in result.warnings


def test_a_huge_size_cap_on_a_tiny_file_allocates_nothing(tmp_path):
    project = rules_project(tmp_path / "proj", "# Rules\n@small.md\n", {".planning/small.md": "# Small\ntiny\n"})
    result = build(project, **{"references.maxFileBytes": 1 << 30})  # the largest cap the config allows
    assert "tiny" in result.context
    with pytest.raises(ConfigError, match="references.maxFileBytes"):  # and past it, a clear error
        build(project, **{"references.maxFileBytes": 30_000_000_000})


def test_the_cap_applies_while_streaming(tmp_path):
    path = tmp_path / "grow.md"
    path.write_text("x" * 5000)
    with pytest.raises(TextUnavailable, match=r"5000 bytes, over references.maxFileBytes \(1000\)"):
        textio.read_local_text(str(path), Trust(str(tmp_path)), 1000, "references.maxFileBytes")
    assert textio.read_local_text(str(path), Trust(str(tmp_path)), 30_000_000_000).text == "x" * 5000


def test_a_session_log_over_the_cap_keeps_its_newest_part(tmp_path, monkeypatch):
    lines = [f'{{"role": "user", "content": "request {i}"}}' for i in range(400)]
    project = write_project(tmp_path / "proj", {
        ".planning/plans/current/plan.md": "# Plan\n\n## Tasks\n- [>] T1 Go\n",
        ".planning/sessions/current/session.log": "\n".join(lines) + "\n",
    })
    monkeypatch.setattr(state_nodes, "_MAX_STATE_FILE_BYTES", 4096)  # the real cap is 64 MiB
    result = build(project)
    assert "request 399" in result.context and "400 rounds" not in result.context
    warning = next(w for w in result.warnings if "session.log is" in w)
    assert "over the state file cap" in warning and "only its last 4096 bytes were read" in warning


# ----------------------------------------------------------------------------- URLs


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1:9/x.md", "loopback address 127.0.0.1"),
    ("http://10.0.0.1/x.md", "private address 10.0.0.1"),
    ("http://[::1]:9/x.md", "loopback address ::1"),
    ("http://0.0.0.0/x.md", "unspecified address"),
    ("http://[::ffff:192.168.1.1]/x.md", "private address 192.168.1.1"),
])
def test_private_addresses_are_refused_without_connecting(url, reason):
    started = time.monotonic()
    with pytest.raises(Refused) as err:
        textio.fetch_url(url, Trust("/nowhere"), 5.0, 1000)
    assert reason in str(err.value) and "trust.allowPrivateUrls" in str(err.value)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/x",
                                 "http://[fd00:ec2::254]/latest"])
def test_metadata_endpoints_are_refused_even_with_private_urls_allowed(url):
    for trust in (Trust("/nowhere"), Trust("/nowhere", allow_private_urls=True)):
        with pytest.raises(Refused, match=r"cloud metadata endpoint.*trust.allowedHosts"):
            textio.fetch_url(url, trust, 5.0, 1000)


def test_url_refusals_in_a_build_name_the_line_and_the_setting(tmp_path):
    main = "# Rules\n@http://127.0.0.1:9/a.md\n@http://10.0.0.1/b.md\n@http://169.254.169.254/c\n"
    project = rules_project(tmp_path / "proj", main)
    started = time.monotonic()
    result = build(project, "see @doc http://metadata.google.internal/computeMetadata/v1/ and @doc http://[::1]:9/d.md")
    assert time.monotonic() - started < 10
    assert_refused(result, ".planning/main.md:2:", "loopback", "set trust.allowPrivateUrls: true")
    assert_refused(result, ".planning/main.md:3:", "private address 10.0.0.1", "trust.allowPrivateUrls")
    assert_refused(result, ".planning/main.md:4:", "cloud metadata", "trust.allowedHosts")
    assert_refused(result, "http://metadata.google.internal/computeMetadata/v1", "cloud metadata")
    assert_refused(result, "http://[::1]:9/d.md", "loopback", "trust.allowPrivateUrls")


def _handler(routes: dict):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            status, headers, body = routes.get(self.path, (404, {}, b"no"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value.replace("{port}", str(self.server.server_address[1])))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


_ROUTES = {
    "/doc.md": (200, {}, f"# Doc\n{SECRET}\n".encode()),
    "/to-doc": (302, {"Location": "/doc.md"}, b""),
    "/to-localhost": (302, {"Location": "http://localhost:{port}/doc.md"}, b""),
    "/to-loopback": (301, {"Location": "http://127.0.0.1:{port}/doc.md"}, b""),
    "/to-ftp": (302, {"Location": "ftp://127.0.0.1/doc.md"}, b""),
    "/to-metadata": (307, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
    **{f"/hop/{i}": (302, {"Location": f"/hop/{i + 1}"}, b"") for i in range(5)},
    "/hop/5": (200, {}, b"# End of hops\n"),
}


@pytest.fixture(scope="module")
def server():
    with local_http_server(_handler(_ROUTES)) as url:
        yield url


def test_allow_private_urls_widens_the_rule(tmp_path, server):
    project = rules_project(tmp_path / "proj", f"# Rules\n@{server}/doc.md\n")
    assert_refused(build(project), ".planning/main.md:2:", "loopback address 127.0.0.1", "trust.allowPrivateUrls")
    assert SECRET in build(project, **{"trust.allowPrivateUrls": True}).context


def test_redirects_are_followed_and_each_hop_checked(server):
    port = server.rsplit(":", 1)[1]
    local = Trust("/nowhere", allow_private_urls=True, allowed_hosts=("127.0.0.1",))
    assert SECRET in textio.fetch_url(f"{server}/to-doc", local, 5.0, 1000).text
    with pytest.raises(Refused, match=rf"redirected to http://localhost:{port}/doc.md\): host localhost is not in "
                                      r"trust.allowedHosts \(127.0.0.1\); not fetched \(add it"):
        textio.fetch_url(f"{server}/to-localhost", local, 5.0, 1000)
    named = Trust("/nowhere", allow_private_urls=True, allowed_hosts=("localhost",))
    with pytest.raises(Refused, match=r"redirected to http://127.0.0.1:\d+/doc.md\): host 127.0.0.1 is not in"):
        textio.fetch_url(f"http://localhost:{port}/to-loopback", named, 5.0, 1000)
    with pytest.raises(Refused, match=r"redirected to ftp://127.0.0.1/doc.md\): only http:// and https://"):
        textio.fetch_url(f"{server}/to-ftp", local, 5.0, 1000)
    anywhere = Trust("/nowhere", allow_private_urls=True)
    with pytest.raises(Refused, match=r"redirected to http://169.254.169.254/latest/meta-data/\): 169.254.169.254 "
                                      r"is a cloud metadata endpoint"):
        textio.fetch_url(f"{server}/to-metadata", anywhere, 5.0, 1000)


def test_too_many_redirects_are_refused(tmp_path, server):
    trust = Trust("/nowhere", allow_private_urls=True, max_redirects=3)
    with pytest.raises(Refused, match=r"more than trust.maxRedirects \(3\) redirects; not fetched \(raise "
                                      r"trust.maxRedirects"):
        textio.fetch_url(f"{server}/hop/0", trust, 5.0, 1000)
    assert "End of hops" in textio.fetch_url(f"{server}/hop/0", Trust("/n", allow_private_urls=True, max_redirects=5), 5.0, 1000).text
    project = rules_project(tmp_path / "proj", f"# Rules\n@{server}/hop/0\n")
    result = build(project, **{"trust.allowPrivateUrls": True})
    assert_refused(result, ".planning/main.md:2:", "trust.maxRedirects (3)")


class _Dripper:
    """A raw socket server on 127.0.0.1 that sends an HTTP response one byte at a time, every
    ``interval`` seconds, and never finishes the headers (until stopped)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        payload = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100000
        with conn:
            for byte in payload:
                if self.stop.wait(self.interval):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


def test_slow_headers_time_out_at_the_connect_timeout():
    with _Dripper(0.1) as dripper:
        trust = Trust("/nowhere", allow_private_urls=True, connect_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(TextUnavailable, match=r"did not connect and send its headers within "
                                                  r"trust.urlConnectTimeout \(0.5 s\)"):
            textio.fetch_url(f"{dripper.url}/slow.md", trust, 30.0, 1000)
        assert time.monotonic() - started < 2.0  # a byte every 0.1 s never trips a socket timeout


def test_one_deadline_bounds_every_fetch_of_a_build(tmp_path):
    with _Dripper(0.2) as dripper:
        main = "# Rules\n" + "".join(f"@{dripper.url}/ref{i}.md\n" for i in range(8))
        request = "Read " + " ".join(f"@doc {dripper.url}/doc{i}.md" for i in range(7))
        project = rules_project(tmp_path / "proj", main)
        started = time.monotonic()
        result = build(project, request, **{"trust.allowPrivateUrls": True, "trust.urlConnectTimeout": 5.0,
                                            "references.urlTimeout": 5.0, "trust.buildDeadline": 1.5})
        elapsed = time.monotonic() - started
    assert elapsed < 6.0  # 15 URLs x 5 s each without the shared deadline
    spent = [w for w in result.warnings if "trust.buildDeadline (1.5 s) is spent" in w]
    more = sum(int(w.split()[2]) for w in result.warnings if w.endswith(" more like this"))
    assert len(spent) + more == 15  # 5 of each kind (references, request docs) shown, the rest counted
    assert any(w.startswith(".planning/main.md:2:") for w in spent)
    assert any(f"{dripper.url}/doc0.md" in w for w in spent)


def test_environment_proxies_are_not_used(server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://10.255.255.1:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://10.255.255.1:3128")
    trust = Trust("/nowhere", allow_private_urls=True)
    assert SECRET in textio.fetch_url(f"{server}/doc.md", trust, 5.0, 1000).text


# ----------------------------------------------------------------------------- pure pieces


def test_address_refusal_covers_the_special_ranges():
    assert textio.address_refusal("93.184.216.34") is None
    for address, name in [("127.0.0.2", "loopback"), ("10.1.2.3", "private"), ("172.16.0.1", "private"),
                          ("192.168.0.1", "private"), ("169.254.169.254", "link-local"), ("224.0.0.1", "multicast"),
                          ("0.0.0.0", "unspecified"), ("240.0.0.1", "reserved"), ("100.64.0.1", "non-public"),
                          ("fe80::1", "link-local"), ("fd00:ec2::254", "private"), ("::", "unspecified")]:
        assert name in (textio.address_refusal(address) or ""), address


def test_clean_text_keeps_newlines_tabs_and_cr():
    assert textio.clean_text("a\tb\r\nc\x1b[2J\x1b[1;31md\x00\x7f\x9be") == ("a\tb\r\ncde", 5)


_CONTROL_HEAVY = st.text(st.sampled_from(["\x1b", "[", "]", "\x07", "\\", "m", "P", "0", ";", " ", "a", "\n", "\t",
                                          "\r", "\x00", "\x01", "\x7f", "\x85", "\x9b", "é", "中", "\u2028"]),
                         max_size=40)


@settings(max_examples=400, deadline=None)
@given(_CONTROL_HEAVY)
def test_cleaning_utf8_bytes_removes_what_cleaning_the_text_removes(text):
    cleaned, removed = textio.clean_utf8(text.encode("utf-8"))
    assert (cleaned.decode("utf-8"), removed) == textio.clean_text(text)


_STATE_FILES = {  # path -> the project around it (the other files make the layout and the session format)
    ".planning/plans/current/plan.md": {".planning/sessions/current/session.log": ""},
    ".planning/sessions/current/session.log": {".planning/plans/current/plan.md": "# Plan\n- [ ] one\n"},
    ".planning/STATE.md": {".planning/ROADMAP.md": "# Roadmap\n\n## Phase 1: Core\n"},
    ".aider.chat.history.md": {".planning/plans/current/plan.md": "# Plan\n- [ ] one\n"},
}


def _not_regular(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.skipif(not HAS_MKFIFO, reason="no FIFOs on this system")
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
@pytest.mark.parametrize("name", sorted(_STATE_FILES))
def test_a_state_file_that_is_not_a_regular_file_is_a_warning_naming_it(tmp_path, name, kind):
    project = write_project(tmp_path / "proj", {"README.md": "x\n", **_STATE_FILES[name]})
    _not_regular(project / name, kind)
    extra = ["--set", "trust.allowedPaths=[/dev]"] if kind == "device" else []
    done = subprocess.run([sys.executable, "-m", "ctxengine.cli", "build", str(project), "--format", "json",
                           "--request", "Fix the bug", "--set", "state.includeGit=false", *extra],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    what = {"fifo": "is a FIFO", "folder": "is a directory", "device": "a character device"}[kind]
    warnings = [w for w in json.loads(done.stdout)["warnings"] if name in w and what in w]
    assert warnings and "not a regular file" in warnings[0], json.loads(done.stdout)["warnings"]


@settings(max_examples=300, deadline=None)
@given(_CONTROL_HEAVY, st.booleans(), _CONTROL_HEAVY, st.booleans())
def test_a_file_read_again_after_it_grew_reads_as_a_file_read_whole(head, line_end, tail, crlf):
    import hashlib

    from ctxengine.nodes.lib import digest
    from ctxengine.nodes.lib.grown import GrownTexts

    grown = GrownTexts(min_bytes=0)
    head += "\n" if line_end else ""  # a prefix that ends a line can be re-used; others are read whole
    first, whole = head.encode("utf-8"), (head + tail).encode("utf-8")

    def make(raw: bytes) -> tuple[str, int, bytes]:
        cleaned, removed = textio.clean_utf8(raw)
        cleaned = cleaned.replace(b"\r\n", b"\n") if crlf else cleaned
        return cleaned.decode("utf-8"), removed, cleaned

    text, removed, first_digest, grew_from = grown.text("t.md", first, make, textio_clean._prefix_safe)
    assert (text, removed, grew_from) == (*make(first)[:2], None)
    assert first_digest == digest.text_digest(text)
    text, removed, whole_digest, grew_from = grown.text("t.md", whole, make, textio_clean._prefix_safe)
    assert (text, removed) == make(whole)[:2]
    assert whole_digest == digest.text_digest(text) == hashlib.sha256(text.encode("utf-8")).digest()[:16]  # extended
    assert grew_from in (None, (len(make(first)[0]), first_digest))  # None: read whole (its prefix not re-usable)
    if grew_from is not None:
        assert text.startswith(make(first)[0])


# ----------------------------------------------------------------------------- every special-purpose address


@pytest.fixture
def no_traffic(monkeypatch) -> list:
    """Every connect in this process blocked and recorded; names resolve only when they are IP
    literals (no resolver is asked): nothing leaves the machine."""
    tried: list = []

    def blocked_connect(self, address, *args):
        tried.append(address)
        raise OSError("connect blocked by the test")

    def blocked_create_connection(address, *args, **kwargs):
        tried.append(address)
        raise OSError("connect blocked by the test")

    def literal_only(host, port, *args, **kwargs):
        import ipaddress

        ip = ipaddress.ip_address(host)  # a name would be a ValueError: never resolved here
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        sockaddr = (str(ip), port, 0, 0) if ip.version == 6 else (str(ip), port)
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]

    monkeypatch.setattr(socket.socket, "connect", blocked_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", blocked_connect)
    monkeypatch.setattr(socket, "create_connection", blocked_create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", literal_only)
    return tried


TEREDO_AROUND_METADATA = "2001:0:4136:e378:8000:63bf:5601:5601"  # client: ~0x56015601 = 169.254.169.254


@pytest.mark.parametrize("host, reason", [
    ("192.0.0.192", "cloud metadata endpoint"),
    ("[::ffff:192.0.0.192]", "cloud metadata address"),
    ("[fec0::1]", "site-local address fec0::1"),
    ("192.88.99.1", "deprecated 6to4 relay anycast address 192.88.99.1"),
    ("[2002:a9fe:a9fe::]", "cloud metadata address"),
    (f"[{TEREDO_AROUND_METADATA}]", "cloud metadata address"),
    ("[64:ff9b::a9fe:a9fe]", "cloud metadata address"),
    ("[64:ff9b::a00:1]", "NAT64 address 64:ff9b::a00:1 carrying the private address 10.0.0.1"),
    ("[2002:c0a8:101::1]", "6to4 address 2002:c0a8:101::1 carrying the private address 192.168.1.1"),
    ("[2001:0:4136:e378:8000:63bf:3fff:fdfe]", "Teredo address 2001:0:4136:e378:8000:63bf:3fff:fdfe carrying the "
                                                "documentation address 192.0.2.1"),  # client ~0x3ffffdfe
    ("[64:ff9b:1::a9fe:a9fe]", "local-use NAT64 address"),
    ("192.0.0.9", "IETF protocol assignment address 192.0.0.9"),
    ("198.18.0.1", "benchmarking address 198.18.0.1"),
    ("[2001:db8::1]", "documentation address 2001:db8::1"),
    ("[3fff::1]", "documentation address 3fff::1"),
    ("[::1.2.3.4]", "reserved address ::102:304"),
])
def test_every_special_purpose_address_is_refused_before_any_connect(no_traffic, host, reason):
    with pytest.raises(Refused) as err:
        textio.fetch_url(f"http://{host}/x.md", Trust("/nowhere"), 5.0, 1000)
    assert reason in str(err.value), str(err.value)
    assert no_traffic == []
    if "metadata" in reason:  # allowing private addresses does not open the metadata service
        with pytest.raises(Refused, match="cloud metadata"):
            textio.fetch_url(f"http://{host}/x.md", Trust("/nowhere", allow_private_urls=True), 5.0, 1000)
        assert no_traffic == []


@pytest.mark.parametrize("host, address", [("8.8.8.8", "8.8.8.8"), ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
                                           ("[2002:808:808::1]", "2002:808:808::1")])
def test_a_public_address_is_let_through_to_the_blocked_connect(no_traffic, host, address):
    with pytest.raises(TextUnavailable) as err:
        textio.fetch_url(f"http://{host}/x.md", Trust("/nowhere"), 5.0, 1000)
    assert not isinstance(err.value, Refused), str(err.value)
    assert [a[0] for a in no_traffic] == [address]


def test_the_registries_are_judged_by_table_not_by_is_global():
    import ipaddress

    for address in ("192.0.0.192", "192.88.99.1", "fec0::1"):
        assert textio.address_refusal(address) is not None
    for address in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::1"):
        assert textio.address_refusal(address) is None
    assert textio.embedded_ipv4(ipaddress.IPv6Address(TEREDO_AROUND_METADATA)) == (
        "Teredo", ipaddress.IPv4Address("169.254.169.254"))
    assert "192.0.0.192" in textio.METADATA_HOSTS

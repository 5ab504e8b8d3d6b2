"""Shared fixtures: where ../shared is, and small project builders."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
# the tokenizer cache of this run, not the developer's ~/.cache
os.environ.setdefault("CTXENGINE_CACHE_DIR", tempfile.mkdtemp(prefix="ctxengine-test-cache-"))
# git in the tests' repositories sees neither the developer's config nor an enclosing repository
os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
os.environ.setdefault("GIT_CEILING_DIRECTORIES", tempfile.gettempdir())
os.environ["CTXENGINE_CONFIG"] = os.path.join(tempfile.mkdtemp(prefix="ctxengine-test-"), "none.yaml")  # no user config
os.environ["CLAUDE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="ctxengine-test-claude-")  # never the developer's Claude Code sessions

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
CORPUS_PLANNING = SHARED / "corpus" / "planning"
CORPUS_SESSIONS = SHARED / "corpus" / "sessions"
SUITES = SHARED / "suites"
DEMO = REPO / "examples" / "demo"
#: A test that reads ../shared (the real corpus, the peer suites) is skipped, with this reason,
#: on a checkout without it; CI has it beside the repository.
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not found: put the shared corpus and "
                                  "suites beside the repository, or set CTXENGINE_SHARED to their folder")


@contextlib.contextmanager
def local_http_server(handler):
    """A real ThreadingHTTPServer on 127.0.0.1 (any free port) serving ``handler``, with no
    proxy in the way; yields its base URL."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            patch.delenv(name, raising=False)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()
            httpd.server_close()


def corpus_projects() -> list[Path]:
    """The real GSD projects of ../shared/corpus/planning (none when ../shared is missing)."""
    if not CORPUS_PLANNING.is_dir():
        return []
    return sorted(p for p in CORPUS_PLANNING.iterdir() if (p / ".planning").is_dir())


def write_project(root: Path, files: dict[str, str | dict]) -> Path:
    """Write ``files`` (relative path -> text, or a dict written as JSON) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) if isinstance(content, dict) else content, encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path: Path):
    """A factory: project({"path": text, ...}) -> the project folder."""
    return lambda files: write_project(tmp_path, files)

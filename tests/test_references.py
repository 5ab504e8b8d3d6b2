"""Stage 2, reference documents: config entries, @ lines, load-once, cycles, depth, URLs."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import http.server  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hamilton import driver  # noqa: E402

from conftest import local_http_server  # noqa: E402

import ctxengine.nodes.config as config_nodes  # noqa: E402
import ctxengine.nodes.references as ref_nodes  # noqa: E402
import ctxengine.nodes.settings as settings_nodes  # noqa: E402
import ctxengine.nodes.state as state_nodes  # noqa: E402
from ctxengine.nodes.lib import references as lib  # noqa: E402
from ctxengine.nodes.types import ConfigError, ReferenceLoadError, Source  # noqa: E402

SHARED = Path(os.environ.get("CTXENGINE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "corpus" / "planning"


# ----------------------------------------------------------------------------- helpers


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def config_for(root: Path, overrides: dict | None = None) -> dict:
    """context_config through the real config nodes (defaults, config.json, overrides)."""
    resolved = config_nodes.resolved_config(
        str(root), config_nodes.defaults(), config_nodes.project_config(str(root)), overrides or {}
    )
    return config_nodes.context_config(resolved)


def refs(core=(), project=(), session=(), **settings) -> dict:
    return {"references": {"core": list(core), "project": list(project), "session": list(session), **settings}}


def run(root: Path, overrides: dict | None = None):
    """(ReferenceSet, ordered documents, sections, warnings) by calling the nodes directly."""
    cfg = config_for(root, overrides)
    settings = settings_nodes.reference_settings(cfg)
    docs = ref_nodes.reference_documents(str(root), ref_nodes.reference_specs(settings), settings,
                                         settings_nodes.trust_settings(cfg))
    ordered = ref_nodes.ordered_references(docs)
    return docs, ordered, ref_nodes.reference_sections(ordered), ref_nodes.reference_warnings(docs)


def private_refs(**kwargs) -> dict:
    """refs(...) with trust.allowPrivateUrls: the test server is on 127.0.0.1, which the trust
    rules refuse by default (an API override is user-level, so it may widen them)."""
    return {**refs(**kwargs), "trust.allowPrivateUrls": True}


def by_key(sections):
    return {s.key: s for s in sections}


# ----------------------------------------------------------------------------- @ lines (pure)


@pytest.mark.parametrize("token, expected", [
    ("references/db.md", True),
    ("/abs/x.md", True),
    (".planning/STATE.md", True),
    ("notes.md", True),
    ("https://h/doc.md", True),
    ("https://medium.com/@someone/post", True),
    ("builtin:gsd-rules", True),
    ("ftp://host/doc.md", True),  # looks like a reference; refused later as a non-http scheme
    ("C:/Users/me/.claude/x.md", True),
    ("someone@example.com", False),
    ("Composable", False),
    ("OptIn(ExperimentalMaterial3Api::class)", False),
    ("v1.0", False),
    ("builtin:", False),
    ("", False),
])
def test_reference_token_recognition(token, expected):
    assert lib.is_reference_token(token) is expected


def test_at_lines_skip_fences_emails_annotations_and_keep_file_line_numbers():
    body = "\n".join([
        "# Doc",                            # 10
        "@references/db.md",                # 11
        "@ references/spaced.md",           # 12: @ then a space: not a reference
        "@alice@example.com",               # 13
        "@Serializable",                    # 14
        "```kotlin",                        # 15
        "@shared/src/Model.kt",             # 16: inside a fence
        "```",                              # 17
        "@src/lib.rs (pattern to follow)",  # 18: a note after the target
        "  @indented/x.md",                 # 19: not at the line start
        "@builtin:gsd-rules",               # 20
    ])
    assert lib.at_references(body, first_line=10) == [
        (11, "references/db.md"), (18, "src/lib.rs"), (20, "builtin:gsd-rules")]


def test_file_candidates_follow_the_planning_then_root_rule():
    assert lib.file_candidates("references/db.md", "/p") == ["/p/.planning/references/db.md", "/p/references/db.md"]
    assert lib.file_candidates(".planning/STATE.md", "/p") == ["/p/.planning/STATE.md"]
    assert lib.file_candidates("./.planning/../x.md", "/p") == ["/p/.planning/x.md", "/p/x.md"]
    assert lib.file_candidates("/abs/../abs/x.md", "/p") == ["/abs/x.md"]
    assert lib.file_candidates("~/notes/x.md", "/p", home="/home/me") == ["/home/me/notes/x.md"]
    assert lib.file_candidates("C:\\Users\\me\\x.md", "/p") == ["C:/Users/me/x.md"]
    assert lib.target_kind("C:/Users/me/x.md") == "path"
    assert lib.target_kind("ftp://h/x.md") == "scheme"


def test_closest_names_match_path_and_file_name():
    names = ["references/db.md", "references/api.md", "gsd-rules.md", "phases/01-x/01-01-PLAN.md"]
    assert lib.closest_names("refrences/db.md", names)[0] == "references/db.md"
    assert lib.closest_names("db.md", names) == ["references/db.md"]
    assert lib.closest_names(".planning/gsd-rule.md", names)[0] == "gsd-rules.md"
    assert lib.closest_names("zzz/qqq.txt", names) == []


def test_walk_is_pure_given_its_readers():
    texts = {"a": "# A\n@b.md\n@c.md\n", "b": "# B\n@c.md\n", "c": "# C\n@a.md\n"}

    def locate(token, referrer):
        name = token.split(".")[0]
        if name not in texts:
            raise lib.ReferenceProblem("not found")
        return lib.Target("file", name, name + ".md")

    specs = [lib.ReferenceSpec("project", "a.md", 0, 0)]
    result = lib.walk_references(specs, locate, lambda t: texts[t.key], 8, {"core": 95, "project": 60, "session": 55})
    assert [d.key for d in result.documents] == ["a", "b", "c"]
    assert [d.parent for d in result.documents] == [None, "a", "b"]
    assert [(link.parent, link.status) for link in result.links] == [
        ("a", "loaded"), ("b", "loaded"), ("c", "cycle"), ("a", "already-loaded")]
    assert result.warnings == ("c.md:2: @a.md closes a cycle a.md -> b.md -> c.md -> a.md; not followed again",)


# ----------------------------------------------------------------------------- config


def test_specs_keep_group_and_config_order(tmp_path):
    cfg = config_for(tmp_path, refs(core=["r.md"], project=["p1.md", "p2.md"], session=["s.md"]))
    specs = ref_nodes.reference_specs(settings_nodes.reference_settings(cfg))
    assert [(s.group, s.target, s.index, s.order) for s in specs] == [
        ("core", "r.md", 0, 0), ("project", "p1.md", 0, 1), ("project", "p2.md", 1, 2), ("session", "s.md", 0, 3)]
    assert specs[2].where == "references.project[1]"


def test_a_non_string_entry_is_a_config_error(tmp_path):
    cfg = config_for(tmp_path, refs(project=["ok.md", 42]))
    with pytest.raises(ConfigError, match=r"references\.project\[1\]"):
        ref_nodes.reference_specs(settings_nodes.reference_settings(cfg))


# ----------------------------------------------------------------------------- files and @ lines


def test_recursive_at_lines_load_inline_documents_after_their_parent(tmp_path):
    write(tmp_path, {
        ".planning/gsd-rules.md": "# Rules\nAlways test.\n@references/style.md\nEnd of rules.\n",
        ".planning/references/style.md": "# Style\nShort functions.\n@references/naming.md\n",
        ".planning/references/naming.md": "# Naming\nNames say what they return.\n",
        ".planning/references/db.md": "# Database\n@.planning/STATE.md\nUse migrations.\n",
        ".planning/STATE.md": "# State\nPhase 2 of 3.\n",
    })
    docs, ordered, sections, warnings = run(tmp_path, refs(core=["gsd-rules.md"], project=["references/db.md"]))
    assert warnings == ()
    assert [s.key for s in sections] == [
        "ref:.planning/gsd-rules.md", "ref:.planning/references/style.md", "ref:.planning/references/naming.md",
        "ref:.planning/references/db.md", "ref:.planning/STATE.md"]
    found = {d.source.location: d for d in docs.documents}
    style, state = found[".planning/references/style.md"], found[".planning/STATE.md"]
    assert (style.group, style.parent) == ("inline", str(tmp_path.resolve() / ".planning/gsd-rules.md"))
    assert style.priority == 95 and state.priority == 60  # inherit the pulling document's group default
    keyed = by_key(sections)
    assert keyed["ref:.planning/references/naming.md"].kind == "rules"  # inline child of core, two levels down
    assert keyed["ref:.planning/references/naming.md"].pool == "system"
    assert keyed["ref:.planning/STATE.md"].kind == "reference"
    assert keyed["ref:.planning/STATE.md"].pool == "references"
    assert keyed["ref:.planning/STATE.md"].data["parent"] == ".planning/references/db.md"
    rules = keyed["ref:.planning/gsd-rules.md"]
    assert rules.content == "Always test.\nEnd of rules.\n"  # title heading shown by the template  # the resolved @ line is gone
    assert rules.sources == (Source("file", ".planning/gsd-rules.md", (1, 4)),)
    assert rules.tier == "immutable"


def test_a_cycle_is_a_warning_with_its_path_and_each_document_loads_once(tmp_path):
    write(tmp_path, {
        ".planning/a.md": "# A\n@b.md\n",
        ".planning/b.md": "# B\n@a.md\n",
    })
    docs, _, sections, warnings = run(tmp_path, refs(project=["a.md"]))
    assert [s.key for s in sections] == ["ref:.planning/a.md", "ref:.planning/b.md"]
    assert warnings == (".planning/b.md:2: @a.md closes a cycle .planning/a.md -> .planning/b.md -> .planning/a.md;"
                        " not followed again",)
    assert by_key(sections)["ref:.planning/b.md"].content == ""  # a is in the context already


def test_a_self_reference_is_a_cycle_of_one(tmp_path):
    write(tmp_path, {".planning/a.md": "# A\n@a.md\n"})
    _, _, sections, warnings = run(tmp_path, refs(project=["a.md"]))
    assert len(sections) == 1
    assert "a cycle .planning/a.md -> .planning/a.md" in warnings[0]


def test_depth_is_limited_by_max_depth_with_a_warning(tmp_path):
    write(tmp_path, {
        ".planning/d0.md": "# D0\n@d1.md\n",
        ".planning/d1.md": "# D1\n@d2.md\n",
        ".planning/d2.md": "# D2\n@d3.md\n",
        ".planning/d3.md": "# D3\n",
    })
    _, _, sections, warnings = run(tmp_path, refs(project=["d0.md"], maxDepth=2))
    assert [s.key for s in sections] == ["ref:.planning/d0.md", "ref:.planning/d1.md", "ref:.planning/d2.md"]
    assert len(warnings) == 1
    assert warnings[0].startswith(".planning/d2.md:2: @d3.md not followed: references.maxDepth (2) reached")
    assert by_key(sections)["ref:.planning/d2.md"].content == "@d3.md\n"  # unresolved: the line stays
    _, _, sections, _ = run(tmp_path, refs(project=["d0.md"], maxDepth=0))
    assert [s.key for s in sections] == ["ref:.planning/d0.md"]


def test_a_document_named_twice_loads_once_under_its_first_parent(tmp_path):
    write(tmp_path, {
        ".planning/a.md": "# A\n@shared.md\n",
        ".planning/b.md": "# B\n@shared.md\n@a.md\n@c.md\n",
        ".planning/c.md": "# C\n",
        ".planning/shared.md": "# Shared\n",
    })
    docs, _, sections, warnings = run(tmp_path, refs(project=["a.md", "b.md", "./a.md", "c.md"]))
    assert [s.key for s in sections] == [
        "ref:.planning/a.md", "ref:.planning/shared.md", "ref:.planning/b.md", "ref:.planning/c.md"]
    assert docs.by_key()[str(tmp_path.resolve() / ".planning/c.md")].group == "project"  # configured, not inline
    assert docs.by_key()[str(tmp_path.resolve() / ".planning/shared.md")].parent.endswith("a.md")
    assert by_key(sections)["ref:.planning/b.md"].content == ""
    assert [link.status for link in docs.links] == ["loaded", "already-loaded", "already-loaded", "configured"]
    assert warnings == ("references.project[2] './a.md': the same document as references.project[0]; loaded once",)


def test_frontmatter_is_metadata_and_priority_orders_with_ties_in_config_order(tmp_path):
    write(tmp_path, {
        ".planning/low.md": "---\ntitle: Low one\npriority: 40\ntriggers: [db]\n---\n# Heading\n",
        ".planning/tie1.md": "# Tie one\n@child.md\n",
        ".planning/child.md": "Just text, no heading.\n",
        ".planning/tie2.md": "---\npriority: 60\ndeprecated: true\n---\n# Tie two\nold stuff\n",
        ".planning/high.md": "---\npriority: 90\n---\n# High\n",
        ".planning/sess.md": "# Session note\n",
    })
    docs, ordered, sections, warnings = run(
        tmp_path, refs(project=["low.md", "tie1.md", "tie2.md", "high.md"], session=["sess.md"]))
    assert warnings == ()
    assert [s.key for s in sections] == [
        "ref:.planning/high.md", "ref:.planning/tie1.md", "ref:.planning/child.md", "ref:.planning/tie2.md",
        "ref:.planning/sess.md", "ref:.planning/low.md"]
    assert [s.priority for s in sections] == [90, 60, 60, 60, 55, 40]
    assert [s.title for s in sections] == ["High", "Tie one", "child.md", "Tie two", "Session note", "Low one"]
    keyed = by_key(sections)
    assert keyed["ref:.planning/low.md"].data["metadata"] == {"title": "Low one", "priority": 40, "triggers": ["db"]}
    assert type(keyed["ref:.planning/low.md"].data["metadata"]) is dict
    assert keyed["ref:.planning/low.md"].tier == "discardable"
    assert keyed["ref:.planning/tie2.md"].deprecated is True
    assert keyed["ref:.planning/tie2.md"].content == "old stuff\n"
    assert keyed["ref:.planning/tie2.md"].sources[0].lines == (5, 6)
    assert [d.order for d in ordered] == [4, 1, 2, 3, 5, 0]


def test_bad_frontmatter_is_a_warning_and_the_document_is_used_without_metadata(tmp_path):
    write(tmp_path, {".planning/bad.md": "---\ntitle: Bad\npriority: [unclosed\n---\n# Body title\ntext\n"})
    _, _, sections, warnings = run(tmp_path, refs(project=["bad.md"]))
    (section,) = sections
    assert section.data["metadata"] == {}
    assert section.title == "Body title"
    assert section.content == "text\n"
    assert section.priority == 60
    assert len(warnings) == 1 and warnings[0].startswith(".planning/bad.md:")
    assert "without metadata" in warnings[0]
    line = int(warnings[0].split(":")[1])
    assert 2 <= line <= 4


def test_a_bad_priority_value_is_a_warning_and_the_default_applies(tmp_path):
    write(tmp_path, {".planning/p.md": "---\npriority: high\n---\n# P\n"})
    _, _, sections, warnings = run(tmp_path, refs(project=["p.md"]))
    assert sections[0].priority == 60
    assert warnings == (".planning/p.md: frontmatter priority 'high' is not an integer 0-100; using 60",)


def test_a_missing_configured_file_is_an_error_naming_the_paths_tried_and_close_names(tmp_path):
    write(tmp_path, {".planning/references/database.md": "# DB\n", ".planning/gsd-rules.md": "# R\n"})
    with pytest.raises(ReferenceLoadError) as err:
        run(tmp_path, refs(project=["refrences/database.md"]))
    message = str(err.value)
    assert "references.project[0] 'refrences/database.md'" in message
    assert str(tmp_path.resolve() / ".planning/refrences/database.md") in message
    assert str(tmp_path.resolve() / "refrences/database.md") in message
    assert "did you mean references/database.md" in message


def test_a_missing_at_file_is_a_warning_naming_the_referrer_line_and_close_names(tmp_path):
    write(tmp_path, {
        ".planning/main.md": "# Main\nintro\n@references/databse.md\n",
        ".planning/references/database.md": "# DB\n",
    })
    _, _, sections, warnings = run(tmp_path, refs(project=["main.md"]))
    assert len(sections) == 1
    assert warnings[0].startswith(".planning/main.md:3: @references/databse.md: file not found (tried ")
    assert warnings[0].endswith("did you mean references/database.md?")
    assert sections[0].content == "intro\n@references/databse.md\n"  # not resolved: kept


def test_directories_and_binary_files_are_warnings(tmp_path):
    write(tmp_path, {".planning/main.md": "# Main\n@phases/01-x/\n@logo.png\n", ".planning/phases/01-x/a.md": "x"})
    (tmp_path / ".planning/logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    _, _, sections, warnings = run(tmp_path, refs(project=["main.md"]))
    assert len(sections) == 1
    assert "is a directory" in warnings[0] and warnings[0].startswith(".planning/main.md:2:")
    assert "is binary" in warnings[1] and warnings[1].startswith(".planning/main.md:3:")


def test_absolute_paths_in_config_and_at_lines(tmp_path):
    outside = write(tmp_path / "elsewhere", {"team.md": "# Team rules\n@notes/extra.md\n", "notes/extra.md": "# X\n"})
    project = write(tmp_path / "proj", {".planning/main.md": f"# Main\n@{outside.resolve() / 'notes/extra.md'}\n"})
    team = str(outside.resolve() / "team.md")
    allowed = {**refs(core=[team], project=["main.md"]), "trust.allowedPaths": [str(outside)]}
    _, _, sections, warnings = run(project, allowed)
    # notes/extra.md relative to the project does not exist: a warning, then main.md pulls it absolutely
    assert [s.key for s in sections] == [f"ref:{team}", "ref:.planning/main.md",
                                         f"ref:{outside.resolve() / 'notes/extra.md'}"]
    assert sections[0].kind == "rules" and sections[0].sources[0] == Source("file", team, (1, 2))
    assert warnings[0].startswith(f"{team}:2: @notes/extra.md: file not found")


# ----------------------------------------------------------------------------- built-ins


def test_the_default_core_reference_is_the_builtin_gsd_rules(tmp_path):
    write(tmp_path, {".planning/STATE.md": "# State\n"})
    _, _, sections, warnings = run(tmp_path)
    (rules,) = sections
    assert (rules.key, rules.kind, rules.pool, rules.priority) == ("ref:builtin:gsd-rules", "rules", "system", 95)
    assert rules.title == "GSD rules" and "## Verify before claiming done" in rules.content
    assert rules.sources[0].kind == "builtin" and rules.sources[0].location == "builtin:gsd-rules"
    assert rules.data["metadata"]["priority"] == 95
    assert warnings == ()


def test_builtin_through_an_at_line_and_an_unknown_builtin(tmp_path):
    write(tmp_path, {".planning/main.md": "# Main\n@builtin:gsd-rules\n@builtin:gsd-rulez\n"})
    docs, _, sections, warnings = run(tmp_path, refs(project=["main.md"]))
    assert [s.key for s in sections] == ["ref:builtin:gsd-rules", "ref:.planning/main.md"]  # 95 (frontmatter) first
    assert sections[0].kind == "reference"  # pulled in by a project document: not core
    assert warnings == (".planning/main.md:3: @builtin:gsd-rulez: no builtin reference 'gsd-rulez' "
                        "(built-ins: gsd-rules); did you mean builtin:gsd-rules?",)
    with pytest.raises(ReferenceLoadError, match="references.core.0. 'builtin:nope'"):
        run(tmp_path, refs(core=["builtin:nope"]))


def test_missing_config_file_suggests_the_builtin(tmp_path):
    (tmp_path / ".planning").mkdir()
    with pytest.raises(ReferenceLoadError, match=r"did you mean builtin:gsd-rules\?"):
        run(tmp_path, refs(core=["gsd-rules.md"]))


# ----------------------------------------------------------------------------- URLs against a real server


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):  # noqa: N802
        route = self.routes.get(self.path)
        try:
            if route is None:
                self.send_error(404, "Not Found")
                return
            delay, body, with_length = route
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Type", "text/markdown; charset=utf-8")
            if with_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path == "/drip.md":  # headers at once, then the body slowly: 20 x 50 ms
                for start in range(0, len(body), 10):
                    self.wfile.write(body[start:start + 10])
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (timeout test)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    """A real http.server on 127.0.0.1 (any free port), no proxies in the way."""
    _Handler.routes = {
        "/doc.md": (0, b"---\ntitle: Remote doc\npriority: 70\n---\n# R\n@other.md\n@/etc/hostname\n", True),
        "/other.md": (0, b"# Other remote\n", True),
        "/slow.md": (1.0, b"# Slow\n", True),
        "/big.md": (0, b"x" * 5000, True),
        "/big-stream.md": (0, b"y" * 5000, False),
        "/drip.md": (0, b"z" * 200, True),
    }
    with local_http_server(_Handler) as url:
        yield url


def test_a_configured_url_loads_and_its_relative_at_lines_stay_remote(tmp_path, server):
    _, _, sections, warnings = run(tmp_path, private_refs(project=[f"{server}/doc.md#intro"]))
    assert [s.key for s in sections] == [f"ref:{server}/doc.md", f"ref:{server}/other.md"]
    remote, other = sections
    assert (remote.title, remote.priority, remote.kind) == ("Remote doc", 70, "reference")
    assert remote.sources == (Source("url", f"{server}/doc.md", (5, 7)),)
    assert remote.content == "### R\n@/etc/hostname\n"
    assert other.priority == 60 and other.title == "Other remote"
    assert warnings == (f"{server}/doc.md:7: @/etc/hostname: a URL document may not pull in local files",)


def test_url_at_lines_404_and_other_schemes_are_warnings(tmp_path, server):
    main = f"# Main\n@{server}/nothing.md\n@ftp://example.com/x.md\n@{server}/other.md\n"
    write(tmp_path, {".planning/main.md": main})
    _, _, sections, warnings = run(tmp_path, private_refs(project=["main.md"]))
    assert [s.key for s in sections] == ["ref:.planning/main.md", f"ref:{server}/other.md"]
    assert warnings == (
        f".planning/main.md:2: @{server}/nothing.md: {server}/nothing.md answered HTTP 404 Not Found",
        ".planning/main.md:3: @ftp://example.com/x.md: only http:// and https:// URLs are read, not ftp:",
    )


def test_configured_url_failures_are_errors(tmp_path, server):
    with pytest.raises(ReferenceLoadError, match="HTTP 404"):
        run(tmp_path, private_refs(project=[f"{server}/gone.md"]))
    with pytest.raises(ReferenceLoadError, match=r"references.session.0. 'file:///etc/passwd': only http"):
        run(tmp_path, private_refs(session=["file:///etc/passwd"]))


def test_a_slow_url_times_out_after_url_timeout(tmp_path, server):
    write(tmp_path, {".planning/main.md": f"# Main\n@{server}/slow.md\n"})
    started = time.monotonic()
    _, _, sections, warnings = run(tmp_path, private_refs(project=["main.md"], urlTimeout=0.2))
    assert time.monotonic() - started < 0.95  # the slow route answers after 1 s
    assert len(sections) == 1
    assert warnings == (f".planning/main.md:2: @{server}/slow.md: {server}/slow.md did not answer within "
                        "references.urlTimeout (0.2 s); not loaded",)


def test_url_timeout_bounds_the_whole_download_not_just_each_read(tmp_path, server):
    started = time.monotonic()
    with pytest.raises(ReferenceLoadError, match=r"did not answer within references.urlTimeout \(0.3 s\)"):
        run(tmp_path, private_refs(project=[f"{server}/drip.md"], urlTimeout=0.3))
    assert time.monotonic() - started < 0.95  # the drip takes 1 s in all
    _, _, sections, _ = run(tmp_path, private_refs(project=[f"{server}/drip.md"], urlTimeout=3))
    assert sections[0].content == "z" * 200


@pytest.mark.parametrize("path, size", [("/big.md", "5000 bytes"), ("/big-stream.md", "more than 1000 bytes")])
def test_a_url_over_the_size_cap_is_refused(tmp_path, server, path, size):
    with pytest.raises(ReferenceLoadError) as err:
        run(tmp_path, private_refs(project=[server + path], urlMaxBytes=1000))
    assert f"is {size}, over references.urlMaxBytes (1000); not loaded" in str(err.value)
    _, _, sections, _ = run(tmp_path, private_refs(project=[server + path], urlMaxBytes=5000))
    assert len(sections[0].content) == 5000


# ----------------------------------------------------------------------------- through Hamilton


def _driver():
    return driver.Builder().with_modules(config_nodes, settings_nodes, state_nodes, ref_nodes).build()


def test_the_hamilton_driver_gives_what_the_direct_calls_give(tmp_path):
    write(tmp_path, {
        ".planning/config.json": json.dumps({"references": {"core": ["gsd-rules.md"],
                                                            "project": ["references/architecture.md"]}}),
        ".planning/gsd-rules.md": "---\npriority: 98\n---\n# Project rules\n@builtin:gsd-rules\n",
        ".planning/references/architecture.md": "# Architecture\n@references/missing.md\n",
        ".planning/plans/current/plan.md": "# Plan\n- [ ] T1\n",
    })
    overrides = {"references.session": ["plans/current/plan.md"]}
    out = _driver().execute(["reference_sections", "reference_warnings", "ordered_references"],
                            inputs={"project_dir": str(tmp_path), "overrides": overrides})
    sections = out["reference_sections"]
    assert [(s.key, s.kind, s.priority) for s in sections] == [
        ("ref:.planning/gsd-rules.md", "rules", 98),
        ("ref:builtin:gsd-rules", "rules", 95),
        ("ref:.planning/references/architecture.md", "reference", 60),
        ("ref:.planning/plans/current/plan.md", "reference", 55),
    ]
    assert out["reference_warnings"][0].startswith(".planning/references/architecture.md:2: @references/missing.md")
    direct = run(tmp_path, overrides)
    assert direct[2] == sections and direct[3] == out["reference_warnings"]


def test_every_node_is_tagged_with_the_references_stage():
    dr = _driver()
    nodes = {v.name: v for v in dr.list_available_variables() if v.tags.get("stage") == "references"}
    assert set(nodes) == {"project_rules", "reference_specs", "fetch_deadline", "reference_documents",
                          "ordered_references", "reference_sections", "reference_warnings"}
    assert nodes["reference_documents"].tags.get("loader") == "file"
    assert nodes["fetch_deadline"].tags.get("loader") == "url"


def test_a_cached_driver_rereads_a_changed_reference(tmp_path):
    project = write(tmp_path / "proj", {".planning/a.md": "# One\n"})
    dr = driver.Builder().with_modules(config_nodes, settings_nodes, state_nodes, ref_nodes).with_cache(path=str(tmp_path / "cache")).build()
    inputs = {"project_dir": str(project), "overrides": {"references.project": ["a.md"]}}
    assert [s.title for s in dr.execute(["reference_sections"], inputs=inputs)["reference_sections"]] == ["One"]
    (project / ".planning/a.md").write_text("# Two\n", encoding="utf-8")
    assert [s.title for s in dr.execute(["reference_sections"], inputs=inputs)["reference_sections"]] == ["Two"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
def test_every_real_gsd_project_builds_its_references():
    dr = _driver()
    projects = sorted(p for p in CORPUS.iterdir() if (p / ".planning").is_dir())
    assert len(projects) >= 5
    for root in projects:
        inputs = {"project_dir": str(root), "overrides": {}}
        out = dr.execute(["reference_sections", "reference_warnings"], inputs=inputs)
        assert [s.key for s in out["reference_sections"]] == ["ref:builtin:gsd-rules"], root
        assert out["reference_warnings"] == ()


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
def test_a_real_gsd_plan_pulls_in_its_at_context():
    root = CORPUS / "0xLeathery__helix-staking"
    plan = ".planning/phases/01-foundation-and-token-infrastructure/01-01-PLAN.md"
    _, _, sections, warnings = run(root, {"references": {"session": [plan], "project": [".planning/STATE.md"]}})
    keys = [s.key for s in sections]
    assert keys[:3] == ["ref:builtin:gsd-rules", "ref:.planning/STATE.md", f"ref:{plan}"]
    assert "ref:.planning/PROJECT.md" in keys and "ref:.planning/ROADMAP.md" in keys
    project_md = by_key(sections)["ref:.planning/PROJECT.md"]
    assert project_md.data["parent"] == plan and project_md.priority == 55
    plan_text = by_key(sections)[f"ref:{plan}"].content
    assert "@.planning/PROJECT.md" not in plan_text and "@.planning/STATE.md" not in plan_text
    assert "@/Users/annon/.claude/get-shit-done/workflows/execute-plan.md" in plan_text  # not read: kept
    # outside the project: refused without looking, so the warning does not say whether it exists
    outside = f"{plan}:77: @/Users/annon/.claude/get-shit-done/workflows/execute-plan.md"
    assert any(w.startswith(outside) and "is outside the project; not read" in w and "file not found" not in w
               for w in warnings), warnings


def test_document_headings_nest_under_their_title():
    from ctxengine.nodes.lib.markdown import nest_under_title

    text = "# Architecture\n\nIntro.\n\n## Authentication\n\nLogin.\n\n```\n# not a heading\n```\n"
    nested = nest_under_title(text, "Architecture")
    assert nested.startswith("Intro.")
    assert "\n### Authentication\n" in nested
    assert "# not a heading" in nested and "### not" not in nested
    # a document whose first heading is not its title keeps it, pushed below the title level
    assert nest_under_title("# Other\n\ntext", "Title").startswith("### Other")


def test_a_reference_file_over_the_size_cap_is_refused_with_the_key_to_raise(tmp_path):
    from ctxengine.driver import execute

    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "big.md").write_text("x" * 5000)
    with pytest.raises(ReferenceLoadError, match=r"over references\.maxFileBytes \(1000\)"):
        execute(["reference_sections"], tmp_path, {"references.project": ["big.md"], "references.maxFileBytes": 1000})


def test_a_document_whose_text_did_not_change_is_not_parsed_again(tmp_path):
    """Warm builds (serve) parse a document's frontmatter once per text: the memo keeps the parse
    (kind ``document``) by the digest of the text and its name; an edited document is parsed again."""
    import shutil

    import ctxengine
    from ctxengine import driver as ctx_driver

    project = tmp_path / "demo"
    shutil.copytree(ctxengine.bundled_example("demo"), project)
    outputs = ["reference_documents", "planning_files"]
    ctx_driver.MEMO.clear()
    first = ctx_driver.execute(outputs, project, cache=False)
    made = ctx_driver.MEMO.made["document"]
    assert made >= 2  # the references and the planning documents of the demo
    again = ctx_driver.execute(outputs, project, cache=False)
    assert ctx_driver.MEMO.made["document"] == made
    assert again["reference_documents"] == first["reference_documents"]
    assert again["planning_files"] == first["planning_files"]
    edited = project / ".planning" / "references" / "security.md"
    edited.write_text("---\ntitle: Edited security\n---\n" + edited.read_text(encoding="utf-8"), encoding="utf-8")
    changed = ctx_driver.execute(outputs, project, cache=False)
    assert ctx_driver.MEMO.made["document"] == made + 1
    titles = [c.title for c in changed["planning_files"].documents.values()] + \
        [d.title for d in changed["reference_documents"].documents]
    assert "Edited security" in titles

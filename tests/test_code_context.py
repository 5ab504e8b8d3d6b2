"""The code stage (issue 22): named files in full or outlined, a tree-sitter repo map ranked from
them, under the trust rules, in the budget like every section. Real files in several languages
in temporary git repositories, through the real driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ctxengine
from ctxengine.cli import main as cli_main
from ctxengine.nodes.lib.code import tags as T

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

QUIET = {"state.includeEnvironment": False, "state.includeGit": False, "cache.maxBytes": 1 << 20}

APP = '''from lib.models import Order


class App:
    """The application."""

    def run(self):
        order = Order()
        return order.total()


def main():
    App().run()
'''
MODELS = '''class Order:
    def total(self) -> int:
        return sum(line.price for line in self.lines)


def compute_invoice_total(order):
    return round(order.total(), 2)
'''
TS = '''export interface Invoice { id: string }
export function renderInvoice(inv: Invoice): string { return inv.id }
'''
GO = '''package store

type Shelf struct{}

func (s *Shelf) Stock() int { return 1 }
'''


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)


def make_project(root: Path, files: dict[str, str | bytes], commit: bool = True) -> Path:
    """A git repository with ``files`` (text or bytes), committed."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "-c", "init.defaultBranch=main", "init", "-q")
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    if commit:
        git(root, "add", "-A")
        git(root, "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false", "commit", "-qm", "init")
    return root


def unrelated(n: int) -> dict[str, str]:
    return {f"misc/util_{i}.py": f"def helper_{i}(x):\n    return x + {i}\n\n\nclass Thing{i}:\n    pass\n" for i in range(n)}


def code_nodes(project: Path, request: str, outputs=("code_sections", "code_files", "code_tags", "code_ranking",
                                                      "code_warnings"), **overrides):
    return ctxengine.run_nodes(list(outputs), project, request, overrides={**QUIET, **overrides}, cache=False)


def section(sections, kind):
    return next((s for s in sections if s.kind == kind), None)


def test_a_named_file_is_present_in_full_with_its_lines_as_lineage(tmp_path):
    project = make_project(tmp_path / "p", {"src/app.py": APP, "lib/models.py": MODELS, "web/invoice.ts": TS,
                                            "store/shelf.go": GO})
    result = ctxengine.build_context(project, "Fix the total in src/app.py", overrides=QUIET, cache=False)
    named = section(result.sections, "code")
    assert named is not None and APP.rstrip("\n") in named.content
    assert "# Code" in result.context and APP.rstrip("\n") in result.context
    assert any(s.location == "src/app.py" and s.lines == (1, APP.count("\n")) for s in named.sources)
    assert result.pools["code"]["use"] > 0
    # the map beside it holds the other languages' definitions, outlined with line numbers
    repo_map = section(result.sections, "codemap")
    assert "lib/models.py" in repo_map.content and "1│class Order:" in repo_map.content
    assert "renderInvoice" in repo_map.content and "Stock" in repo_map.content


def test_at_a_tight_budget_a_named_files_class_and_def_lines_survive(tmp_path):
    body = "".join(f"    def method_{i}(self, value):\n        total = value * {i}\n        return total + {i}\n\n"
                   for i in range(50))
    big = "import os\n\n\nclass Ledger:\n    \"\"\"Books.\"\"\"\n\n" + body + "def top_level():\n    return Ledger()\n"
    project = make_project(tmp_path / "p", {"books/ledger.py": big, "lib/models.py": MODELS})
    out = code_nodes(project, "Refactor books/ledger.py", **{"budget.maxTokens": 20000, "code.share": 0.05})
    named = section(out["code_sections"], "code")
    assert named.data["files"][0]["level"] in ("outline", "top")
    assert "4│class Ledger:" in named.content and "│def top_level():" in named.content
    assert "│    def method_0(self, value):" in named.content
    assert "total = value * 1" not in named.content and "⋮" in named.content
    assert named.sources[0].lines == (4, big.count("\n") - 1)


def test_the_module_a_named_file_imports_outranks_unrelated_ones(tmp_path):
    project = make_project(tmp_path / "p", {"src/app.py": APP, "lib/models.py": MODELS, **unrelated(12)})
    ranking = code_nodes(project, "Work on src/app.py")["code_ranking"]
    order = [path for path, _ in ranking.files]
    assert order[0] == "src/app.py"
    assert order[1] == "lib/models.py"
    scores = dict(ranking.files)
    assert all(scores["lib/models.py"] > scores[p] for p in order if p.startswith("misc/"))


def test_a_request_naming_an_identifier_brings_its_module(tmp_path):
    project = make_project(tmp_path / "p", {"billing/core.py": MODELS, "web/invoice.ts": TS, **unrelated(30)})
    out = code_nodes(project, "Why does compute_invoice_total round wrong?",
                     **{"budget.maxTokens": 12000, "code.share": 0.02})
    ranking = [p for p, _ in out["code_ranking"].files]
    assert ranking[0] == "billing/core.py"
    repo_map = section(out["code_sections"], "codemap")
    assert repo_map.data["files"][0]["path"] == "billing/core.py"
    assert "def compute_invoice_total(order):" in repo_map.content
    assert len(repo_map.data["files"]) < 32  # the budget is tight: not everything is in
    # and a TypeScript identifier likewise
    out = code_nodes(project, "Rename `renderInvoice`", **{"budget.maxTokens": 12000, "code.share": 0.02})
    assert [p for p, _ in out["code_ranking"].files][0] == "web/invoice.ts"


def test_a_plan_naming_a_path_or_symlink_outside_reads_nothing_outside(tmp_path):
    secret = tmp_path / "outside.py"
    secret.write_text("SECRET_TOKEN = 'do-not-read'\n")
    plan = ("# Plan\n\n- [ ] Task 1: edit ../outside.py and src/leak.py and lib/models.py\n")
    project = make_project(tmp_path / "p", {"lib/models.py": MODELS, ".planning/plans/current/plan.md": plan},
                           commit=False)
    (project / "src").mkdir()
    os.symlink(secret, project / "src" / "leak.py")  # tracked by git as a link out of the project
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init")
    result = ctxengine.build_context(project, f"Carry on with the plan; see also {secret}",
                                     overrides=QUIET, cache=False)
    assert "do-not-read" not in result.context and "SECRET_TOKEN" not in result.context
    named = section(result.sections, "code")
    assert [f["path"] for f in named.data["files"]] == ["lib/models.py"]
    warnings = "\n".join(result.warnings)
    assert "../outside.py, outside the project; not read" in warnings
    assert "src/leak.py" in warnings and "outside" in warnings
    assert f"{secret}, outside the project" in warnings
    assert warnings.count("../outside.py") == 1  # named by the task and the plan: one warning


def test_a_binary_or_a_10_mb_generated_file_is_skipped_with_a_reason(tmp_path):
    generated = "// generated\n" + "export const table = [" + "1, " * (3_600_000) + "];\n"
    assert len(generated) > 10_000_000
    project = make_project(tmp_path / "p", {"lib/models.py": MODELS, "gen/table.js": generated,
                                            "native/blob.c": b"\x7fELF\x00\x00int f(){}\n", **unrelated(2)})
    out = code_nodes(project, "Look at gen/table.js and native/blob.c")
    skipped = dict(out["code_files"].skipped)
    assert "over code.maxFileBytes" in skipped["gen/table.js"]
    assert "binary" in skipped["native/blob.c"]
    assert "lib/models.py" in out["code_tags"] and "gen/table.js" not in out["code_tags"]
    warnings = "\n".join(out["code_warnings"])
    assert "gen/table.js" in warnings and "native/blob.c" in warnings  # named: said so
    assert section(out["code_sections"], "codemap") is not None


def test_a_syntax_error_in_one_file_leaves_the_others_mapped(tmp_path):
    project = make_project(tmp_path / "p", {"src/broken.py": "def broken(:\n    return\n\nclass Fine:\n    pass\n",
                                            "lib/models.py": MODELS, "web/invoice.ts": TS, "store/shelf.go": GO})
    out = code_nodes(project, "Fix src/broken.py")
    tags = out["code_tags"]
    assert {"Order", "compute_invoice_total"} <= tags["lib/models.py"].defined_names
    assert "renderInvoice" in tags["web/invoice.ts"].defined_names and "Stock" in tags["store/shelf.go"].defined_names
    assert "syntax errors" in tags["src/broken.py"].error
    assert any("src/broken.py" in w and "syntax errors" in w for w in out["code_warnings"])
    assert "lib/models.py" in section(out["code_sections"], "codemap").content


def test_every_language_gives_its_definitions():
    grammars = T.Grammars()
    samples = {
        "a.py": ("class A:\n    def m(self): pass\n", {"A", "m"}),
        "a.js": ("export class A { m() {} }\nfunction f() {}\n", {"A", "m", "f"}),
        "a.ts": ("interface I {}\ntype T = I\nenum E { X }\nexport function f(): T { return g() }\n", {"I", "T", "E", "f"}),
        "a.tsx": ("export function Comp(p: Props) { return <div/> }\n", {"Comp"}),
        "a.go": ("package m\ntype S struct{}\nfunc (s *S) M() {}\n", {"S", "M"}),
        "a.rs": ("struct S;\ntrait T {}\nfn f() {}\n", {"S", "T", "f"}),
        "A.java": ("class A { void m() {} }\ninterface I {}\n", {"A", "m", "I"}),
        "a.c": ("struct s { int a; };\nint f(int a) { return g(a); }\n", {"s", "f"}),
        "a.cpp": ("namespace n { class C { void m(); }; }\nint main() { return 0; }\n", {"n", "C", "m", "main"}),
    }
    for path, (text, names) in samples.items():
        got = T.file_tags(path, text, grammars)
        assert names <= got.defined_names, (path, got)
    assert T.file_tags("notes.txt", "hello", grammars).language is None


def test_research_maps_nothing_unless_asked_and_code_enabled_false_turns_the_stage_off(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"src/app.py": APP, "lib/models.py": MODELS})
    research = ctxengine.build_context(project, "Study src/app.py", mode="research", overrides=QUIET, cache=False)
    assert section(research.sections, "code") is not None and section(research.sections, "codemap") is None
    asked = ctxengine.build_context(project, "Study src/app.py", mode="research", cache=False,
                                    overrides={**QUIET, "code.map.research": True})
    assert section(asked.sections, "codemap") is not None

    argv = ["build", str(project), "--request", "Fix src/app.py", "--format", "json", "--no-cache",
            "--set", "state.includeEnvironment=false"]
    assert cli_main(argv) == 0
    on = json.loads(capsys.readouterr().out)
    assert cli_main(argv + ["--set", "code.enabled=false"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert "class App:" in json.dumps(on) and "class App:" not in json.dumps(off)
    assert "code" in on["pools"] and "code" not in off["pools"]


def test_a_warm_build_parses_only_the_changed_file(tmp_path):
    from ctxengine import driver

    project = make_project(tmp_path / "p", {"src/app.py": APP, "lib/models.py": MODELS, "web/invoice.ts": TS,
                                            **unrelated(5)})
    driver.MEMO.clear()
    code_nodes(project, "Fix src/app.py", outputs=("code_tags",))
    assert driver.MEMO.made[T.TAGS_VERSION] == 8
    code_nodes(project, "Fix src/app.py", outputs=("code_tags",))
    assert driver.MEMO.made[T.TAGS_VERSION] == 8  # nothing changed: nothing parsed
    (project / "lib" / "models.py").write_text(MODELS + "\n\ndef refund(order):\n    return -order.total()\n")
    tags = code_nodes(project, "Fix src/app.py", outputs=("code_tags",))["code_tags"]
    assert driver.MEMO.made[T.TAGS_VERSION] == 9 and "refund" in tags["lib/models.py"].defined_names


def test_the_planning_folder_is_never_code(tmp_path):
    """A plan that names its own STATE.md and SUMMARY (GSD's ``<context>@.planning/STATE.md``) does
    not pull them into the code sections: the plan sections show them (found when a 8000-token
    build summarized research documents to make room for a copy of the plan)."""
    plan = ("# Plan\n\n<context>\n@.planning/STATE.md\n@.planning/phases/01-x/01-01-SUMMARY.md\n</context>\n\n"
            "- [ ] Fix src/app.py\n")
    project = make_project(tmp_path / "p", {"src/app.py": APP, ".planning/STATE.md": "# State\n\nPhase: 1\n",
                                            ".planning/phases/01-x/01-01-SUMMARY.md": "# Summary\n",
                                            ".planning/plans/current/plan.md": plan})
    out = code_nodes(project, "Continue: .planning/STATE.md says where we are; fix src/app.py")
    shown = [s.location for kind in ("code", "codemap") if section(out["code_sections"], kind)
             for s in section(out["code_sections"], kind).sources]
    assert "src/app.py" in shown and not any(p.startswith(".planning/") for p in shown)


def shown_at(project: Path, request: str, budget: int) -> set[str]:
    """The files the code sections show with the code pool set to ``budget`` tokens."""
    from ctxengine import driver
    from ctxengine.api import build_overrides

    out = driver.execute(["code_sections"], str(project), build_overrides(QUIET), request,
                         {"code_pool_tokens": budget}, cache=False)
    return {source.location for s in out["code_sections"] for source in s.sources}


def test_a_bigger_code_budget_shows_every_file_a_smaller_one_shows(tmp_path):
    # a named file whose full text costs about 2,300 tokens (its outline a tenth of that) importing
    # 40 small modules: at 4,000 the named file fits in full; without the map's floor it left the
    # map less than at 2,000, where it was outlined, and the map showed fewer modules
    modules = {f"pkg/mod_{i:02d}.py": f"class Model{i}:\n    def load_{i}(self, key):\n        return key\n"
               for i in range(40)}
    body = "".join(f"def step_{i}(data):\n" + "".join(f"    data = Model{(i + k) % 40}().load_{(i + k) % 40}(data)  # {k}\n"
                                                     for k in range(6)) + "    return data\n\n\n" for i in range(24))
    imports = "".join(f"from pkg.mod_{i:02d} import Model{i}\n" for i in range(40))
    project = make_project(tmp_path / "p", {"app/main.py": imports + "\n\n" + body, **modules})
    request = "Change app/main.py"
    budgets = (1000, 2000, 3000, 4000, 6000, 8000, 16000)
    shown = [shown_at(project, request, b) for b in budgets]
    assert "app/main.py" in shown[0] and len(shown[0]) > 1
    for (small, fewer), (big, more) in zip(zip(budgets, shown), zip(budgets[1:], shown[1:])):
        assert fewer <= more, f"{big} tokens lost {sorted(fewer - more)} shown at {small}"
    assert len(shown[-1]) == 41  # and the biggest shows everything


def plain_edges(tags, mentioned=frozenset()) -> dict[tuple[str, str], float]:
    """The graph's edges as the rank module's docstring states them, joined name by name in
    plain Python: the yardstick for the numpy join over the packed keys."""
    from ctxengine.nodes.lib.code import rank as R

    definers: dict[str, list[str]] = {}
    for path in sorted(tags):
        for name in tags[path].defined_names:
            definers.setdefault(name, []).append(path)
    edges: dict[tuple[str, str], float] = {}
    for path in sorted(tags):
        for name, uses in tags[path].references:
            files = definers.get(name, [])
            if not files or len(files) > R.MAX_DEFINERS:
                continue
            factor = (R.MENTIONED if name in mentioned else 1.0) / len(files)
            if name.startswith("_") or len(files) > R.RARE_DEFINERS:
                factor *= 0.1
            for target in files:
                if target != path:
                    edges[path, target] = edges.get((path, target), 0.0) + uses ** 0.5 * factor
    return edges


def test_the_graph_joined_from_packed_keys_is_the_one_the_docstring_states(tmp_path):
    # shared names (``load`` in 7 files: common; ``run`` in 22: no edges), a private name, a
    # mentioned one, a self-reference, uses counted more than once, three languages
    files = {"src/app.py": APP, "lib/models.py": MODELS, "web/invoice.ts": TS, "store/shelf.go": GO,
             "web/page.ts": "import { renderInvoice, Invoice } from './invoice'\n"
                            "export function page(i: Invoice) { return renderInvoice(i) + renderInvoice(i) }\n",
             "lib/_hidden.py": "def _secret():\n    return 1\n\n\ndef load():\n    return _secret()\n",
             "lib/user.py": "from lib._hidden import _secret, load\n\n\ndef use():\n    return _secret() + load() + load()\n"}
    files.update({f"pkg/load_{i}.py": f"def load():\n    return {i}\n" for i in range(6)})
    files.update({f"pkg/run_{i}.py": f"def run():\n    return run()\n\n\ndef go_{i}():\n    return run()\n" for i in range(22)})
    project = make_project(tmp_path / "p", files)
    tags = code_nodes(project, "Fix src/app.py", outputs=("code_tags",))["code_tags"]
    from ctxengine.nodes.lib.code import rank as R

    for mentioned in (frozenset(), frozenset({"Order", "_secret", "load"})):
        edges = R.reference_edges(tags, mentioned)
        got = {(edges.paths[a], edges.paths[b]): w for a, b, w in
               zip(edges.source.tolist(), edges.target.tolist(), edges.weight.tolist())}
        want = plain_edges(tags, mentioned)
        assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-9 for k in want), (got, want)
    assert ("lib/user.py", "lib/_hidden.py") in got and ("web/page.ts", "web/invoice.ts") in got
    assert not any(target.startswith("pkg/run_") for _, target in got)  # ``run``: defined in 22 files


def test_one_changed_file_reruns_only_the_code_nodes_that_must(tmp_path):
    """With Hamilton's cache, one edited file parses that file alone and reruns the graph and
    the sections; the names the work gives (and the pool) are served from the cache."""
    from ctxengine import driver

    project = make_project(tmp_path / "p", {"src/app.py": APP, "lib/models.py": MODELS, **unrelated(5)})
    cache_dir = str(tmp_path / "cache")
    outputs = ["code_sections", "code_ranking"]

    def build():
        out = ctxengine.run_nodes(outputs, project, "Fix src/app.py", overrides=QUIET, cache=True, cache_dir=cache_dir)
        return out, driver.last_cache_run()

    driver.MEMO.clear()
    build()
    _, warm = build()
    assert {"code_ranking", "code_sections", "code_names"} <= set(warm.hits)
    (project / "lib" / "models.py").write_text(MODELS + "\n\ndef refund(order):\n    return -order.total()\n")
    out, changed = build()
    assert driver.MEMO.made[T.TAGS_VERSION] == 8  # 7 files, then the edited one
    assert {"code_ranking", "code_sections"} <= set(changed.misses)
    assert {"code_names", "code_pool_tokens"} <= set(changed.hits)
    assert "code_tags" in changed.recomputed and "refund" in section(out["code_sections"], "code").content + \
        section(out["code_sections"], "codemap").content


def test_language_of_reads_the_extension_as_splitext_does():
    cases = ["a.py", "src/App.TSX", "x/.py", "..py", "..a.py", "a/b.c/d", "README", ".bashrc", "a.tar.go",
             "dir.py/file", "x/.hidden.rs", "a.", "a..py", "lib/x.h", "y.HPP"]
    for path in cases:
        assert T.language_of(path) == T.LANGUAGE_OF_SUFFIX.get(os.path.splitext(path)[1].lower()), path


def test_a_names_key_is_its_own_whatever_the_file_or_build():
    from ctxengine.nodes.lib.code import keys as K

    known: dict[str, bytes] = {}
    first = K.name_keys(["Order", "total", "Order"], [("_secret", 2), ("Order", 1)], known)
    assert first == K.name_keys(["total", "Order"], [("_secret", 2), ("Order", 1)])  # no table: the same keys
    assert first.defined == K.name_key("Order") + K.name_key("total") and len(known) == 3
    assert first.referenced[8:] == K.name_key("Order") and first.private == b"\x01\x00"
    assert list(K.key_array(first.referenced)) == [int.from_bytes(K.name_key(n), "little") for n in ("_secret", "Order")]

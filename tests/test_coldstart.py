"""Cold start: what the CLI does before Hamilton is imported, Ctrl-C at any moment, the lib modules import."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DEMO, REPO

SCRIPT = Path(sys.executable).with_name("ctxengine")
CLI = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "ctxengine"]
HEAVY = ("hamilton", "pandas", "numpy", "tiktoken")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _heavy_check(code: str) -> str:
    return (f"import sys\n{code}\nheavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
            "assert not heavy, heavy\n")


def test_import_ctxengine_and_its_cli_load_neither_hamilton_nor_pandas():
    done = _python(_heavy_check("import ctxengine, ctxengine.cli"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["build", "--help"], ["config", "-h"]])
def test_version_and_help_answer_before_hamilton_is_imported(argv):
    code = _heavy_check(f"from ctxengine import cli\nassert cli.main({argv!r}) == 0")
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert ("ctxengine 0.1.0" in done.stdout) if argv == ["--version"] else ("usage:" in done.stdout)


def test_the_public_names_load_on_first_use():
    import ctxengine

    assert set(ctxengine.__all__) <= set(dir(ctxengine))
    from ctxengine.session import Session

    assert ctxengine.Session is Session
    assert issubclass(ctxengine.ConfigError, ctxengine.CtxEngineError)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        ctxengine.nothing_here  # noqa: B018
    done = _python("from ctxengine import *; print(build_context.__name__, BuildResult.__name__)")
    assert done.returncode == 0 and done.stdout.split() == ["build_context", "BuildResult"], done.stderr


def test_importing_the_cli_leaves_the_sigint_handler_as_it_was():
    code = ("import signal\nbefore = signal.getsignal(signal.SIGINT)\nimport ctxengine.cli\n"
            "assert signal.getsignal(signal.SIGINT) is before, signal.getsignal(signal.SIGINT)")
    done = _python(code)
    assert done.returncode == 0, done.stderr


def _startup_seconds() -> float:
    """This machine's interpreter start-up (site included): a signal before it ends is Python's, not ours."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_ctrl_c_at_any_moment_of_a_build_is_one_line_and_exit_130(tmp_path):
    """SIGINT 0.1 to 0.5 s after the start (importing, building the driver, running it): every
    time exit 130 and the one line 'ctxengine: interrupted', never a traceback. On a slow
    machine the delays grow past the bare interpreter's own start-up."""
    floor = 2 * _startup_seconds()
    landed = 0
    for delay in (0.1, 0.15, 0.2, 0.3, 0.4, 0.5):
        process = subprocess.Popen([*CLI, "build", "--request", "Fix the login endpoint"], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(max(delay, floor))
        running = process.poll() is None
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        finished = process.returncode == 0 and err.startswith("ctxengine: ") and err.endswith("%)\n")
        if not running or finished:  # the build was done before the signal landed: nothing to check
            assert "Traceback" not in err
            continue
        landed += 1
        assert (process.returncode, err) == (130, "ctxengine: interrupted\n"), f"SIGINT after {delay} s: {err}"
        assert out == ""
    assert landed >= 3, "the builds ended before the signals: the test checked nothing"


def _node_modules():
    import ctxengine.nodes as nodes

    for info in pkgutil.walk_packages(nodes.__path__, "ctxengine.nodes."):
        yield importlib.import_module(info.name)


def _items(value) -> list:
    """A module variable, or the items of a tuple, list or dict of them (one level: tables of patterns)."""
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, (tuple, list)) else [value]


def test_every_module_of_nodes_imports_and_its_patterns_compile_on_first_use():
    """Each module of nodes/ imports on its own (a bad import in one that a test does not run fails
    here); its module-level patterns are lazy (nodes/lib/regex.py), and each compiles to what
    ``re.compile`` gives, so a typo in a pattern no test uses fails here too."""
    from ctxengine.nodes.lib.regex import LazyRegex

    names, lazy = [], 0
    for module in _node_modules():
        names.append(module.__name__)
        for name, value in vars(module).items():
            for item in _items(value):
                assert not isinstance(item, re.Pattern), f"{module.__name__}.{name}: use lazy_regex (nodes/lib/regex.py)"
                if isinstance(item, LazyRegex):
                    assert item.compiled() == re.compile(*item._source), f"{module.__name__}.{name}"
                    lazy += 1
    assert {"ctxengine.nodes.lib.git.run", "ctxengine.nodes.lib.textio.urls", "ctxengine.nodes.lib.sessions.aider",
            "ctxengine.nodes.lib.sessions.claude_code.rounds", "ctxengine.nodes.quality"} <= set(names)
    assert lazy >= 120


def test_a_lazy_regex_compiles_on_first_use_and_behaves_as_the_compiled_pattern():
    from ctxengine.nodes.lib.regex import lazy_regex

    lazy = lazy_regex(r"(?P<word>[a-z]+)(\d*)", re.I)
    assert lazy._compiled is None
    compiled = re.compile(r"(?P<word>[a-z]+)(\d*)", re.I)
    text = "Alpha1 beta22 GAMMA"
    assert lazy.findall(text) == compiled.findall(text)
    assert lazy.sub(r"\2", text) == compiled.sub(r"\2", text)
    assert lazy.match(text).group("word") == "Alpha"
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == (
        compiled.pattern, compiled.flags, compiled.groups, compiled.groupindex)
    assert lazy.compiled() is lazy._compiled and re.sub(lazy.compiled(), "-", text) == compiled.sub("-", text)
    with pytest.raises(re.error):
        lazy_regex("(unclosed").search("x")


_PATTERNS_USED = """
import gc, sys
from ctxengine import cli
from ctxengine.nodes.lib.regex import LazyRegex
import ctxengine.driver
patterns = [o for o in gc.get_objects() if isinstance(o, LazyRegex)]
assert patterns and not any(p._compiled for p in patterns)
code = cli.main(["build", sys.argv[1], "--request", "Fix the login", "--no-cache"])
print(code, sum(p._compiled is not None for p in patterns), len(patterns))
"""


def test_a_demo_build_compiles_only_the_patterns_it_uses():
    """Importing the driver compiles none of the module-level patterns; the demo build compiles
    the ones it runs, a fraction of them (what the lazy patterns save: nodes/lib/regex.py)."""
    done = subprocess.run([sys.executable, "-c", _PATTERNS_USED, str(DEMO)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    code, used, total = map(int, done.stdout.split("\n")[-2].split())
    assert code == 0 and 0 < used < total / 2, (used, total)


def _bench():
    spec = importlib.util.spec_from_file_location("coldstart_bench", REPO / "benchmarks" / "coldstart.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_coldstart_benchmark_measures_the_phases_of_a_build():
    bench = _bench()
    phases = bench.phase_seconds(1)
    assert "tokenizer table (bpe-openai)" in phases
    assert all(low > 0 for low, _ in phases.values()) and len(phases) == 5


def test_the_coldstart_benchmark_has_the_core_install_and_default_model_rows_and_they_build(tmp_path):
    bench = _bench()
    assert {"import hamilton.driver, no pyarrow", "ctxengine build, no pyarrow", "ctxengine build, gpt-4o, no cache"} \
        <= set(bench.COMMANDS)
    argv, env = bench.COMMANDS["ctxengine build, no pyarrow"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, **env},
                          cwd=tmp_path)
    assert done.returncode == 0 and "# User Request" in done.stdout, done.stderr
    parts = bench.floor_parts(1)
    assert parts["numpy"] > 0 and parts["pandas (numpy apart)"] > 0 and parts["hamilton and the rest"] > 0


def test_the_coldstart_benchmark_measures_what_the_lazy_package_top_saves():
    """The figure behind keeping the PEP 562 package top (issue 21: a lazy load is removed when it
    saves under 10 ms): ``import ctxengine`` with and without what its public names need."""
    bench = _bench()
    lazy, eager = (bench.COMMANDS[label][0] for label in (
        "import ctxengine (public names load on first use)", "import ctxengine and what its public names need"))
    done = subprocess.run([*eager[:2], eager[2] + "; import sys; print('hamilton' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True"], done.stderr  # the lazy row is test_import_ctxengine_and_its_cli_...
    assert lazy[2] == "import ctxengine"


_COLLECTIONS = """
import gc, sys
seen = []
gc.callbacks.append(lambda phase, info: seen.append("hamilton" in sys.modules and not gc.get_freeze_count())
                    if phase == "start" else None)  # a pass while Hamilton is imported, before the freeze
from ctxengine import cli
code = cli.main(["config", sys.argv[1]])
print(sum(seen), gc.isenabled(), gc.get_freeze_count() > 10_000, code)
"""


def test_the_cli_pauses_the_collector_while_it_imports_the_driver_then_freezes_what_they_made():
    done = subprocess.run([sys.executable, "-c", _COLLECTIONS, str(DEMO)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    collections_during_import, enabled, frozen, code = done.stdout.split()[-4:]
    assert collections_during_import == "0"  # without the pause: some 190 passes while Hamilton and pandas load
    assert (enabled, frozen, code) == ("True", "True", "0")


_DRAWING = """
import sys
from ctxengine import cli
code = cli.main(["build", sys.argv[1], "--request", "Fix the login", "--no-cache"])
print(code, sorted(m for m in sys.modules if m.split(".")[0] == "graphviz" or m.startswith("ctxengine.viz")))
"""


def test_a_build_to_stdout_loads_no_drawing_code(tmp_path):
    """graphviz and viz/ (about 9 ms of CPU) load for --lineage, --report, -o and the report
    command, not for every build: ctxengine.api imported viz.report at its top before."""
    done = subprocess.run([sys.executable, "-c", _DRAWING, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "0 []", done.stdout[-300:]


_DEFERRED = """
import sys
from ctxengine import cli
code = cli.main(["build", sys.argv[1], "--request", "Fix the login", "--no-cache", *sys.argv[2:]])
kinds = ("plan", "diff", "headtail", "markdown", "document", "code", "fit", "frontmatter", "aider", "jsonl")
print(code, sorted(m.rsplit(".", 1)[1] for m in sys.modules
                   if m.startswith(("ctxengine.nodes.lib.summarize.", "ctxengine.nodes.lib.sessions."))
                   and m.rsplit(".", 1)[1] in kinds))
"""


def _deferred_loaded(project, *argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _DEFERRED, str(project), *argv], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    code, loaded = done.stdout.split("\n")[-2].split(" ", 1)
    assert code == "0", done.stdout[-300:]
    return eval(loaded)  # noqa: S307 (a list of module names printed by the child)


def test_summaries_and_transcript_parsers_load_only_when_a_build_needs_them(tmp_path):
    """A build that fits summarizes nothing and a project without a transcript parses none: the
    summaries and the aider / JSON Lines parsers (about 30 ms of imports) are not loaded. The
    demo at a budget it does not fit summarizes its documents and parses its session.log."""
    assert _deferred_loaded(tmp_path) == []
    assert _deferred_loaded(DEMO) == ["jsonl"]
    tight = _deferred_loaded(DEMO, "--max-tokens", "1400", "--reserve-tokens", "0")
    assert {"markdown", "document", "fit", "jsonl"} <= set(tight) and "aider" not in tight


def test_node_annotations_are_objects_not_strings():
    """Hamilton reads each node's types with typing.get_type_hints (three times a driver build);
    a string annotation (``from __future__ import annotations``) is compiled and evaluated each
    time: some 1,600 evaluations, the driver's build 27-29 -> 9-14 ms CPU without them."""
    import inspect

    from ctxengine.driver import NODE_MODULES

    strings = [f"{module.__name__}.{name}" for module in NODE_MODULES
               for name, fn in vars(module).items()
               if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_")
               and any(isinstance(hint, str) for hint in fn.__annotations__.values())]
    assert not strings, strings


def test_version_and_help_load_the_errors_not_the_value_types():
    """The CLI catches CtxEngineError at its top: it comes from the leaf nodes/errors.py, so
    ``--version`` and ``--help`` load neither nodes/types.py nor what it brings (the digests,
    hashlib, pickle, dataclasses: about 6 ms of a 55 ms ``ctxengine --version``)."""
    code = ("import sys\nfrom ctxengine import cli\nassert cli.main(['--version']) == 0\nassert cli.main(['--help']) == 0\n"
            "loaded = [m for m in ('ctxengine.nodes.types', 'ctxengine.nodes.lib.digest', 'hashlib', 'pickle') "
            "if m in sys.modules]\nassert not loaded, loaded\n"
            "import ctxengine.nodes.types as t, ctxengine\nassert t.CtxEngineError is ctxengine.CtxEngineError")
    done = _python(code)
    assert done.returncode == 0, done.stderr

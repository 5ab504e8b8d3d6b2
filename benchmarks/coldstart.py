"""Cold start: a fresh ``ctxengine build`` of the demo, start-up alone, and what the time is made of.

    python benchmarks/coldstart.py [--repeat N] [--no-compile]

Every row is a fresh process (min and median of --repeat runs, wall time). Before timing,
the package's bytecode is compiled (``compileall``, what a non-editable ``pip install`` does),
so no run pays for compiling sources; --no-compile skips that. Rows:

- start-up alone: ``python -c pass`` and ``ctxengine --version`` (no Hamilton imported);
- imports: ``ctxengine`` (its public names load on first use, PEP 562) against ``ctxengine`` with
  what those names need, ``ctxengine.cli``, ``hamilton.driver`` (which brings pandas and numpy), pandas alone,
  and hamilton.driver where ``import pyarrow`` fails (what a core install, without the ``parquet``
  extra, pays: pandas imports an installed pyarrow at import time), also with the collector
  paused, as the CLI imports it (its passes over what imports make are wasted);
- the cold build of the demo (its model, gpt-4-turbo: cl100k), with the default counter, with
  ``CTXENGINE_TOKENIZER=tiktoken``, with pyarrow blocked, and with the default model gpt-4o
  (o200k) and no cache (the cache would serve the token counter; the first build has none).

Then the floor: what a build cannot go under while it imports Hamilton's driver, i.e.
``python -c "import hamilton.driver"`` (interpreter start-up, numpy, pandas, Hamilton).

Then the phases of one build measured inside a fresh process (interpreter start-up apart):
importing hamilton.driver, importing ctxengine's own modules, loading the tokenizer table,
building the driver, executing it; and the ``-X importtime`` breakdown of the imports.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pipeline", "nodes", "viz", "configs", "examples")
REQUEST = "Fix the login endpoint: a bad password must return 401"
_SCRIPT = Path(sys.executable).with_name("ctxengine")  # the console script, as a user runs it
CLI = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "ctxengine"]

#: Python code that makes ``import pyarrow`` fail, as on a core install (no ``parquet`` extra).
NO_PYARROW = "import sys; sys.modules['pyarrow'] = None; "
_BUILD = ["build", "--request", REQUEST]
#: The CLI in a process where pyarrow cannot be imported (what the console script runs, after NO_PYARROW).
CLI_NO_PYARROW = [sys.executable, "-c", NO_PYARROW + "from ctxengine.cli import run; sys.argv[1:] = "
                  f"{_BUILD!r}; sys.exit(run())"]

#: What ``import ctxengine`` would cost if pipeline/__init__.py imported its public names (PEP 562 defers them).
EAGER_TOP = "import ctxengine, ctxengine.api, ctxengine.session, ctxengine.experiment, ctxengine.nodes.report"

#: label -> (argv, extra environment)
COMMANDS = {
    "python -c pass": ([sys.executable, "-c", "pass"], {}),
    "ctxengine --version": ([*CLI, "--version"], {}),
    "import ctxengine.cli": ([sys.executable, "-c", "import ctxengine.cli"], {}),
    "import hamilton.driver": ([sys.executable, "-c", "import hamilton.driver"], {"HAMILTON_AUTOLOAD_EXTENSIONS": "0"}),
    "import hamilton.driver, no pyarrow": ([sys.executable, "-c", NO_PYARROW + "import hamilton.driver"],
                                           {"HAMILTON_AUTOLOAD_EXTENSIONS": "0"}),
    "import hamilton.driver, no pyarrow, collector paused": (
        [sys.executable, "-c", NO_PYARROW + "import gc; gc.disable(); import hamilton.driver"],
        {"HAMILTON_AUTOLOAD_EXTENSIONS": "0"}),
    "import pandas": ([sys.executable, "-c", "import pandas"], {}),
    "import ctxengine (public names load on first use)": ([sys.executable, "-c", "import ctxengine"], {}),
    "import ctxengine and what its public names need": ([sys.executable, "-c", EAGER_TOP], {}),
    "ctxengine build (demo)": ([*CLI, *_BUILD], {}),
    "ctxengine build, tiktoken counter": ([*CLI, *_BUILD], {"CTXENGINE_TOKENIZER": "tiktoken"}),
    "ctxengine build, no pyarrow": (CLI_NO_PYARROW, {}),
    "ctxengine build, gpt-4o, no cache": ([*CLI, *_BUILD, "--set", "model=gpt-4o", "--no-cache"], {}),
}

#: Run in a fresh process: the phases of one build, in seconds, as JSON.
PHASES = r"""
import json, os, time
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
t = [time.perf_counter()]
import hamilton.driver
t.append(time.perf_counter())
import ctxengine.cli, ctxengine.api, ctxengine.driver
t.append(time.perf_counter())
from ctxengine.nodes.lib import tokens
counter = tokens.token_counter_for("cl100k_base"); counter.count("warm up")
t.append(time.perf_counter())
ctxengine.driver.default_driver()
t.append(time.perf_counter())
ctxengine.build_context(ctxengine.bundled_example("demo"), REQUEST)
t.append(time.perf_counter())
backend = getattr(tokens, "backend_name", lambda name: "tiktoken")(counter.encoding_name)  # older trees: tiktoken
names = ["import hamilton.driver (pandas, numpy)", "import ctxengine modules", f"tokenizer table ({backend})",
         "build the Hamilton driver", "execute the build"]
print(json.dumps(dict(zip(names, [b - a for a, b in zip(t, t[1:])]))))
""".replace("REQUEST", repr(REQUEST))

#: Groups of the import breakdown: label -> module whose cumulative import time is shown.
IMPORT_GROUPS = ("hamilton.driver", "pandas", "numpy", "pyarrow", "hamilton.function_modifiers", "hamilton.graph",
                 "hamilton.base", "hamilton.caching.adapter", "yaml", "networkx", "tiktoken")


def compile_sources() -> None:
    """Byte-compile the package folders (a non-editable install does this at install time)."""
    for name in SOURCES:
        compileall.compile_dir(str(REPO / name), quiet=1)


def run_seconds(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    """Wall times of ``repeat`` fresh runs of ``argv`` (each must exit 0)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env={**os.environ, **env}, cwd=REPO)
        times.append(time.perf_counter() - start)
    return times


def phase_seconds(repeat: int) -> dict[str, tuple[float, float]]:
    """(min, median) seconds of each build phase over ``repeat`` fresh processes."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", PHASES], check=True, capture_output=True, text=True, cwd=REPO)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {name: (min(r[name] for r in runs), statistics.median(r[name] for r in runs)) for name in runs[0]}


def import_times(code: str) -> dict[str, tuple[float, float]]:
    """module -> (self ms, cumulative ms) of one fresh ``python -X importtime -c code``."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], check=True, capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "HAMILTON_AUTOLOAD_EXTENSIONS": "0"}).stderr
    return {m[3]: (int(m[1]) / 1000, int(m[2]) / 1000)
            for m in re.finditer(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", err)}


def import_breakdown(repeat: int) -> tuple[dict[str, float], float]:
    """Cumulative import ms of IMPORT_GROUPS and the self time of ctxengine's own modules (min of ``repeat``)."""
    groups: dict[str, float] = {}
    own = float("inf")
    for _ in range(repeat):
        times = import_times("import ctxengine.cli, ctxengine.api, ctxengine.driver")
        for module in IMPORT_GROUPS:
            if module in times:
                groups[module] = min(groups.get(module, float("inf")), times[module][1])
        own = min(own, sum(own_ms for module, (own_ms, _) in times.items() if module.startswith("ctxengine")))
    return groups, own


def floor_parts(repeat: int) -> dict[str, float]:
    """What ``python -c "import hamilton.driver"`` is made of, in ms (min of ``repeat`` runs of
    ``-X importtime``; the start-up is ``python -c pass``'s wall time): numpy, pandas without numpy
    (and the pyarrow it imports, when installed), the rest of Hamilton and what it imports."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        found = {module: cumulative for module, (_, cumulative) in import_times("import hamilton.driver").items()}
        parts = {"numpy": found.get("numpy", 0.0), "pyarrow": found.get("pyarrow", 0.0)}
        parts["pandas (numpy apart)"] = found.get("pandas", 0.0) - parts["numpy"]
        parts["hamilton and the rest"] = found.get("hamilton.driver", 0.0) - found.get("pandas", 0.0)
        for key, value in parts.items():
            best[key] = min(best.get(key, float("inf")), value)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile the package first")
    args = parser.parse_args()
    if not args.no_compile:
        compile_sources()

    print(f"{'fresh process (wall)':<52} {'min ms':>8} {'median ms':>10}")
    print("-" * 72)
    walls = {}
    for label, (argv, env) in COMMANDS.items():
        times = walls[label] = run_seconds(argv, env, args.repeat)
        print(f"{label:<52} {min(times) * 1000:>8.0f} {statistics.median(times) * 1000:>10.0f}")
    floor = walls["import hamilton.driver"]
    print(f"{'floor = python -c pass + import hamilton.driver':<48} {min(floor) * 1000:>6.0f} "
          f"{statistics.median(floor) * 1000:>6.0f}")
    parts = floor_parts(args.repeat)
    made = [f"start-up {min(walls['python -c pass']) * 1000:.0f}", f"numpy {parts['numpy']:.0f}",
            f"pandas {parts['pandas (numpy apart)']:.0f} (pyarrow {parts['pyarrow']:.0f} of it)",
            f"hamilton and the rest {parts['hamilton and the rest']:.0f}"]
    print("  made of (ms, -X importtime min): " + ", ".join(made))
    paused = walls["import hamilton.driver, no pyarrow, collector paused"]
    print(f"{'floor as the CLI of a core install imports (no pyarrow, collector paused)':<68} "
          f"{min(paused) * 1000:>6.0f} {statistics.median(paused) * 1000:>6.0f}")

    print(f"\n{'phases of one build, in-process':<40} {'min ms':>8} {'median ms':>10}")
    print("-" * 60)
    phases = phase_seconds(args.repeat)
    for name, (low, mid) in phases.items():
        print(f"{name:<40} {low * 1000:>8.0f} {mid * 1000:>10.0f}")
    print(f"{'sum (interpreter start-up apart)':<40} {sum(v[0] for v in phases.values()) * 1000:>8.0f}")

    groups, own = import_breakdown(args.repeat)
    print(f"\n{'import breakdown (-X importtime, min)':<40} {'cumulative ms':>14}")
    print("-" * 56)
    for module in IMPORT_GROUPS:
        if module in groups:
            print(f"{module:<40} {groups[module]:>14.0f}")
    print(f"{'ctxengine modules (self time)':<40} {own:>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

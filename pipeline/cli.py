"""The ``ctxengine`` command: build, report, config --explain, batch, dag.

Exit codes: 0 success; 1 the output could not be written (stdout closed or full, disk full),
a batch row failed, or an internal error; 2 bad usage or bad configuration (the message names
file and key); 3 when the budget cannot be met; 130 on Ctrl-C. Never a traceback, unless
``--debug``.
"""

from __future__ import annotations

from . import startup_guard  # first: a Ctrl-C during the imports below is one line and exit 130

import argparse
import csv
import gc
import json
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Iterable, Sequence

from .nodes.lib.quote import quoted
from .nodes.errors import CtxEngineError
from .options import MODES, PHASES, internal_error, parse_override
from .version import __version__

#: Named options shared by build and config: argparse dest -> flag (build_overrides takes the dest).
NAMED_OPTIONS = {
    "mode": "--mode", "max_tokens": "--max-tokens", "reserve_tokens": "--reserve-tokens", "compact": "--compact",
    "strategy": "--strategy", "layout": "--layout", "phase": "--phase", "phase_number": "--phase-number",
}
#: The widest value shown in `config` text output; longer ones end in "..." (--format json shows them whole).
VALUE_WIDTH = 60


class _StdoutError(Exception):
    """stdout is closed or full: the output cannot be delivered."""


class _Parser(argparse.ArgumentParser):
    """argparse drops a failed write of --help or --version silently; here it is an error like any other."""

    def _print_message(self, message: str, file=None) -> None:
        if message and file is sys.stdout:
            _emit(message)
        else:
            super()._print_message(message, file)


class _imports_uncollected:
    """The collector paused while the driver is imported, then what the imports made (Hamilton,
    pandas: some 80k objects that live as long as the process) moved out of its reach
    (``gc.freeze``). Imports make modules, classes and functions that live as long as the
    process: the collector's passes during them (some 190) find almost nothing to free and cost
    about 0.1 s of a cold start (benchmarks/coldstart.py), and its full passes over them later
    cost 50-80 ms of a cold build. Only the call that imports the driver does this, and the
    collector is enabled again afterwards if it was (a host calling :func:`main` again keeps
    its collector untouched)."""

    def __enter__(self) -> None:
        self.enabled, self.importing = gc.isenabled(), "ctxengine.driver" not in sys.modules
        if self.importing:  # a host that imported it already keeps its collector as it runs
            gc.disable()

    def __exit__(self, *exc) -> None:
        if self.importing:
            gc.freeze()
            if self.enabled:
                gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script: the exit code, with one line on stderr for any error."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)  # until the arguments are parsed
    try:
        args = _parser().parse_args(argv)
        debug = bool(getattr(args, "debug", False))
        with _imports_uncollected():
            if hasattr(args, "no_cache"):
                from .driver import set_cache_defaults

                # A batch builds each project once: it keeps the cache only when asked (measured by
                # benchmarks/batch.py: a first cached build costs about 2x an uncached one).
                asked = args.cache or args.cache_dir is not None
                set_cache_defaults(not args.no_cache and (asked or args.command != "batch"), args.cache_dir)
            from .driver import quiet_failures
        if debug:
            code = args.handler(args)
        else:
            with quiet_failures():
                code = args.handler(args)
        _flush_stdout()
        return code
    except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except _StdoutError as exc:
        _silence_stdout()
        _say(f"error: {exc}")
        return 1
    except CtxEngineError as exc:
        if debug:
            traceback.print_exc()
        _say(f"error: {exc}")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - one line for anything unexpected
        if debug:
            traceback.print_exc()
        _say(f"{internal_error(exc)} (run with --debug for the traceback)")
        return 1


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="print the traceback of an error (and Hamilton's own failure logs)")
    parser = _Parser(prog="ctxengine", description="Assemble an LLM context for one request and make it fit.")
    parser.add_argument("--version", action="version", version=f"ctxengine {__version__}",
                        help="print the installed version and exit")
    parser.add_argument("--debug", action="store_true", default=False,
                        help="print the traceback of an error (and Hamilton's own failure logs)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="build | report | config | batch | experiment | serve | dag | cache (ctxengine COMMAND -h for its options)")

    build = sub.add_parser("build", parents=[common], help="assemble the context for a request", epilog=_DEFAULTS_NOTE)
    _add_build_inputs(build)
    build.add_argument("--format", choices=("text", "json", "messages"), default="text",
                       help="text: the context on stdout, the budget on stderr; json: context, budget, "
                            "sections, ledger and more as one JSON object; messages: a JSON list of a system "
                            "and a user message with an Anthropic cache_control breakpoint at the end of the "
                            "stable part (default: text)")
    build.add_argument("-o", "--output", default=None, metavar="FILE",
                       help="write the result to this file instead of stdout (a file atomically, a FIFO or device in place, "
                            "through a symlink; its folder must exist)")
    build.add_argument("--lineage", default=None, metavar="FILE",
                       help="also draw which sources fed which sections and what truncation did (.svg, .png, .dot)")
    build.add_argument("--report", default=None, metavar="FILE",
                       help="also write the run report: one self-contained HTML page (budget, sections, lineage)")
    _add_cache(build)
    build.set_defaults(handler=_build)

    report = sub.add_parser("report", parents=[common], help="build and write the run report as one HTML page")
    _add_build_inputs(report)
    report.add_argument("-o", "--output", default="report.html", metavar="FILE",
                        help="the HTML file (written like build -o; its folder must exist; default: report.html)")
    _add_cache(report)
    report.set_defaults(handler=_report)

    config = sub.add_parser("config", parents=[common], help="show the effective configuration")
    _add_project(config)
    _add_named(config)
    _add_set(config)
    config.add_argument("--explain", action="store_true", help="print every value with where it came from")
    config.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: aligned columns; json: a list of {key, value, origin} (default: text)")
    _add_cache(config)
    config.set_defaults(handler=_config)

    batch = sub.add_parser("batch", parents=[common], help="build many projects; one row per project")
    batch.add_argument("projects", nargs="*", metavar="PROJECT_DIR", help="project folders")
    batch.add_argument("--from-file", default=None, metavar="LIST",
                       help="read the jobs from LIST: text (a path a line, # comments), .csv (a header with project "
                            "and optionally request, mode, phase, overrides, dotted.key columns; other columns are "
                            "labels) or .jsonl (objects with those keys); relative paths are from LIST's folder")
    batch.add_argument("--request", default="", metavar="TEXT", help="the user request for every project")
    _add_named(batch)
    _add_set(batch)
    batch.add_argument("--executor", choices=("local", "processes", "dask"), default="local",
                       help="local: one after another in this process; processes: a process pool; dask: a "
                            "LocalCluster on 127.0.0.1, or the running scheduler of --scheduler (default: local)")
    batch.add_argument("--workers", type=_positive, default=None, metavar="N",
                       help="worker processes for processes and dask (default: the CPU count)")
    batch.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                       help="with --executor dask: join this running dask scheduler instead of starting a LocalCluster")
    batch.add_argument("-o", "--output", default=None, metavar="FILE",
                       help="write the rows here (.csv or .jsonl row by row, .parquet in row groups) instead of CSV "
                            "on stdout; Ctrl-C keeps the finished rows")
    batch.add_argument("--contexts-dir", default=None, metavar="DIR",
                       help="write each final context to its own file in DIR (it must exist; name in context_file)")
    batch.add_argument("--resume", action="store_true",
                       help="keep the rows of -o FILE whose project inputs are unchanged (fingerprint column) "
                            "and build only the others")
    _add_cache(batch)
    batch.set_defaults(handler=_batch)

    experiment = sub.add_parser("experiment", parents=[common],
                                help="every combination of settings on every project: a results file, a table, a chart")
    experiment.add_argument("projects", nargs="+", metavar="PROJECT_DIR", help="project folders")
    experiment.add_argument("--vary", dest="vary", action="append", required=True, metavar="KEY=A,B",
                            help="a configuration key and its values, e.g. truncation.summarizer=extractive,headings "
                                 "(repeatable: every combination runs); nodes=none,my_nodes.py varies node swaps")
    _add_module(experiment)
    experiment.add_argument("--request", default="", metavar="TEXT", help="the user request for every run")
    experiment.add_argument("--facts", default=None, metavar="FILE",
                            help="strings to look for in each final context, one a line (the facts_kept column)")
    _add_set(experiment)
    experiment.add_argument("--executor", default="local", metavar="NAME", help="how the runs execute, as in batch "
                            "(default: local)")
    experiment.add_argument("--workers", type=int, default=None, metavar="N", help="parallel workers of the executor")
    experiment.add_argument("-o", "--output", required=True, metavar="FILE",
                            help="the results, one row per project and variant (.csv or .parquet)")
    experiment.add_argument("--chart", default=None, metavar="FILE.png", help="also draw the main figures per variant")
    experiment.set_defaults(handler=_experiment)
    serve = sub.add_parser("serve", parents=[common],
                           help="a Model Context Protocol server on stdio (tools build_context, explain_config)")
    _add_cache(serve)
    serve.add_argument("--allow-trust-overrides", action="store_true",
                       help="let tool calls set trust.* (and state.claudeCode.transcript) in their overrides; "
                            "off by default: the agent reads untrusted project text and is not you")
    serve.set_defaults(handler=_serve)

    dag = sub.add_parser("dag", parents=[common], help="draw the dataflow graph")
    dag.add_argument("-o", "--output", default="dag.svg", metavar="FILE",
                     help="output file (.svg, .png, .pdf or .dot; its folder must exist; default: dag.svg)")
    dag.add_argument("--stage", default=None, metavar="STAGE",
                     help="draw one stage (e.g. truncation), with the nodes of other stages it reads greyed")
    dag.set_defaults(handler=_dag)

    cache = sub.add_parser("cache", parents=[common], help="inspect or clear the cache between runs")
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION", help="stats | clear")
    stats = actions.add_parser("stats", parents=[common], help="size, entries and hits of the last run")
    stats.add_argument("project_dir", nargs="?", default=None, metavar="PROJECT_DIR",
                       help="one project (default: every project in the cache)")
    stats.add_argument("--example", default=None, metavar="NAME", help="one bundled example project")
    stats.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="the folder given to build --cache-dir (default: the user cache)")
    stats.add_argument("--format", choices=("text", "json"), default="text", help="text: a table; json: a list")
    stats.set_defaults(handler=_cache_stats)
    clear = actions.add_parser("clear", parents=[common], help="delete cached results")
    clear.add_argument("project_dir", nargs="?", default=None, metavar="PROJECT_DIR", help="one project's cache")
    clear.add_argument("--example", default=None, metavar="NAME", help="one bundled example project's cache")
    clear.add_argument("--all", action="store_true", help="every project's cache")
    clear.add_argument("--stale", action="store_true", help="the caches of projects that no longer exist")
    clear.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="the folder given to build --cache-dir (default: the user cache); alone: all of it")
    clear.set_defaults(handler=_cache_clear)
    return parser


#: Under the help of build: where the defaults come from (each option names its own).
_DEFAULTS_NOTE = ("Defaults are those of configs/defaults.yaml, under your config file and the project's "
                  ".planning/config.json; 'ctxengine config PROJECT_DIR --explain' shows every value and where it "
                  "came from.")


def _add_build_inputs(parser: argparse.ArgumentParser) -> None:
    """What build and report share: the project, the request and the configuration options."""
    _add_project(parser)
    request = parser.add_mutually_exclusive_group()
    request.add_argument("--request", default=None, metavar="TEXT", help="the user request text")
    request.add_argument("--request-file", default=None, metavar="FILE",
                         help="read the user request from this file ('-' for stdin)")
    _add_named(parser)
    _add_set(parser)
    _add_module(parser)


def _add_cache(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", action="store_true",
                        help="keep Hamilton's cache between runs (the default, but for batch), per project under "
                             "$CTXENGINE_CACHE_DIR/ctxengine-cache, else $XDG_CACHE_HOME/ctxengine, else "
                             "~/.cache/ctxengine")
    parser.add_argument("--no-cache", action="store_true",
                        help="compute everything, read and write no cache (wins over --cache and --cache-dir)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="keep the cache between runs in DIR/ctxengine-cache, a folder ctxengine makes inside "
                             "DIR (nothing else in DIR is touched), instead of the user cache; a relative DIR is "
                             "from the working folder; one inside the project is refused")


def _add_module(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--module", dest="modules", action="append", default=[], metavar="FILE.py",
                        help="a Python file whose functions replace the nodes of the same name, e.g. a summarizer "
                             "of your own (repeatable; checked against each replaced node's type)")


def _add_project(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project_dir", nargs="?", default=None, metavar="PROJECT_DIR",
                        help="project folder (default: the bundled example 'demo')")
    parser.add_argument("--example", default=None, metavar="NAME",
                        help=f"use a bundled example project instead of PROJECT_DIR ({_example_names()})")


def _reserve(value: str) -> int | str:
    """--reserve-tokens: a whole number of tokens, or "auto" (budget.reserveShare of the budget)."""
    if value.strip().lower() == "auto":
        return "auto"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quoted(value)}: give a whole number of tokens or auto") from None


def _add_named(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=MODES, help="the mode template (config key 'template'; default: dev)")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="the model's context window (budget.maxTokens; default: 128000, or the project's config)")
    parser.add_argument("--reserve-tokens", type=_reserve, metavar="N|auto",
                        help="tokens kept free for the response, or auto (budget.reserveTokens; default: auto, "
                             "budget.reserveShare 0.2 of the budget capped by the model's maxOutputTokens)")
    parser.add_argument("--compact", action="store_true", default=None,
                        help="compact even when the context fits (truncation.compact; default: off)")
    parser.add_argument("--strategy", choices=("auto", "tail", "head", "middle"),
                        help="force one truncation strategy (truncation.strategy; default: auto, by content kind)")
    parser.add_argument("--layout", choices=("auto", "article", "gsd"), help="project layout (state.layout; default: auto, from the .planning/ files)")
    parser.add_argument("--phase", choices=PHASES,
                        help="GSD phase type: which .planning/ files load; auto follows the position "
                             "(disclosure.phase; default auto)")
    parser.add_argument("--phase-number", type=_phase_number, metavar="N",
                        help="pin the current GSD phase, e.g. 12 or 8.1 (state.gsdPhase; default: read STATE.md)")


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a configuration value, e.g. --set budget.maxTokens=32000 (repeatable)")


def _phase_number(text: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)*", text.strip()):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a phase number; write it like 12 or 8.1")
    return text.strip()


def _example_names() -> str:
    from importlib import resources  # 8 ms (tempfile, zipfile machinery): only when a parser is built

    root = resources.files("ctxengine.examples")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    return ", ".join(names)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return dict(parse_override(text) for text in args.sets)


def _named(args: argparse.Namespace) -> dict[str, Any]:
    return {dest: getattr(args, dest) for dest in NAMED_OPTIONS if getattr(args, dest, None) is not None}


def _project(args: argparse.Namespace) -> Path:
    from .api import bundled_example

    if args.example is not None:
        if args.project_dir is not None:
            raise CtxEngineError(f"give either PROJECT_DIR ({quoted(args.project_dir)}) or --example {args.example}, not both")
        try:
            return bundled_example(args.example)
        except CtxEngineError as exc:
            raise CtxEngineError(f"--example {quoted(args.example)}: {exc}") from None
    if args.project_dir is None:
        return bundled_example()
    path = Path(args.project_dir)
    if not os.path.isdir(path):  # False for a name too long, where Path.is_dir raises (3.11)
        raise CtxEngineError(f"project folder {quoted(args.project_dir)} does not exist or is not a folder")
    return path


def _request_text(args: argparse.Namespace) -> str:
    """The request of --request, or of --request-file (read like any other input: a regular file,
    or stdin for '-', at most the cap of a project file, UTF-8 text); a NUL byte or a lone
    surrogate is an error naming the option."""
    from .api import check_request

    if args.request_file is None:
        request, where = args.request or "", "--request"
    else:
        request, where = _request_file_text(args.request_file), f"--request-file {quoted(args.request_file)}"
    check_request(request, where)
    return request


def _request_file_text(path: str) -> str:
    """The text of --request-file: a regular file (a FIFO or device is refused, never waited on),
    or stdin for '-'; either over :data:`~ctxengine.nodes.lib.textio.DEFAULT_MAX_FILE_BYTES` is refused."""
    from .nodes.lib.textio import DEFAULT_MAX_FILE_BYTES, read_text_file

    shown = f"--request-file {quoted(path)}"
    if path != "-":
        return read_text_file(path, DEFAULT_MAX_FILE_BYTES, "a request", CtxEngineError, shown,
                              "give a regular file, or - to read stdin")
    data = sys.stdin.buffer.read(DEFAULT_MAX_FILE_BYTES + 1)
    if len(data) > DEFAULT_MAX_FILE_BYTES:
        raise CtxEngineError(f"{shown}: stdin holds more than the {DEFAULT_MAX_FILE_BYTES}-byte cap of a request; "
                             "shorten it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CtxEngineError(f"{shown}: stdin is not UTF-8 text (bad byte at offset {exc.start}); send UTF-8") from None


def _warn_if_empty(request: str, how: str) -> None:
    if not request.strip():
        _say(f"warning: no request given: the context has no user request; {how}")


def _build(args: argparse.Namespace) -> int:
    _check_outputs((args.output, "-o"), (args.lineage, "--lineage"), (args.report, "--report"))
    out = _run_build(args, lineage=bool(args.lineage or args.report))
    result = out["build_result"]
    if args.format == "json":
        _write(json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n", args.output)
    else:  # the output first: when it cannot be written, the error is the only line on stderr
        if args.format == "messages":
            _write(json.dumps(result.messages(), indent=2, ensure_ascii=False) + "\n", args.output)
        else:
            _write(result.context if result.context.endswith("\n") else result.context + "\n", args.output)
        for warning in result.warnings:
            _say(f"warning: {warning}")
        budget = result.budget
        _say(f"{budget.total_tokens} / {budget.available_tokens} tokens "
             f"({budget.utilization_rate:.1%}){' OVER BUDGET' if budget.is_over_budget else ''}")
    if args.lineage:
        from .viz.lineage import write_lineage

        written, note = write_lineage(out["context_lineage"], args.lineage, _project(args))
        _say(f"wrote {written}" + (f" ({note})" if note else ""))
    if args.report:
        _write_report(out, args.report, "--report", _project(args))
    return 0


def _run_build(args: argparse.Namespace, lineage: bool) -> dict[str, Any]:
    """The build of build and report: the result, and the lineage graph when asked."""
    from .api import run_nodes

    request = _request_text(args)
    _warn_if_empty(request, "use --request TEXT or --request-file FILE")
    outputs = ["build_result"] + (["context_lineage"] if lineage else [])
    return run_nodes(outputs, _project(args), request, overrides=_overrides(args), nodes=args.modules, **_named(args))


def _report(args: argparse.Namespace) -> int:
    _check_outputs((args.output, "-o"))
    out = _run_build(args, lineage=True)
    for warning in out["build_result"].warnings:
        _say(f"warning: {warning}")
    _write_report(out, args.output, "-o", _project(args))
    return 0


def _write_report(out: dict[str, Any], output: str, option: str, project_dir: Path) -> None:
    """The run report of a build of ``project_dir`` written to ``output`` (its lineage drawn by a
    ``dot`` outside the project)."""
    from .viz.report import report_html

    html = report_html(out["build_result"], out["context_lineage"], project_dir=project_dir)
    _say(f"wrote {_write(html, output, option)}")


def _config(args: argparse.Namespace) -> int:
    from .api import build_overrides, explain_config

    sets = _overrides(args)
    rows, warnings = explain_config(_project(args), build_overrides(sets, **_named(args)))
    for warning in warnings:
        _say(f"warning: {warning}")
    flags = _flag_origins(args, sets)
    rows = [(key, value, _origin(origin, key, flags, sets)) for key, value, origin in rows]
    if args.format == "json":
        _emit(json.dumps([{"key": k, "value": v, "origin": o} for k, v, o in rows], indent=2, ensure_ascii=False) + "\n")
        return 0
    table = [(key, _shown(value), origin) for key, value, origin in rows]
    _emit(explain_table(table, with_origin=args.explain))
    return 0


def explain_table(rows: Sequence[tuple[str, str, str]], with_origin: bool = True) -> str:
    """``rows`` of (key, value, origin) as aligned columns under a header."""
    header = ("KEY", "VALUE", "ORIGIN") if with_origin else ("KEY", "VALUE")
    cells = [header] + [row if with_origin else row[:2] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]]).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= VALUE_WIDTH else shown[: VALUE_WIDTH - 3] + "..."


def _origin(origin: str, key: str, flags: dict[str, str], sets: dict[str, Any]) -> str:
    """The configuration layer, with the CLI option that set an override named."""
    from .nodes.config import OVERRIDE_ORIGIN

    if origin != OVERRIDE_ORIGIN:
        return origin
    return f"override ({flags[key]})" if key in flags else "override (--set)" if key in sets else origin


def _flag_origins(args: argparse.Namespace, sets: dict[str, Any]) -> dict[str, str]:
    """Dotted key -> the named option that set it (a --set of the same key wins)."""
    from .api import build_overrides

    flags = {}
    for dest, value in _named(args).items():
        for key in build_overrides(None, **{dest: value}):
            flags[key] = NAMED_OPTIONS[dest]
    return {key: flag for key, flag in flags.items() if key not in sets}


def _batch(args: argparse.Namespace) -> int:
    from .batch import run_jobs
    from .batch_io import resume_plan, row_columns

    _check_batch_args(args)
    jobs = _batch_jobs(args)
    columns = row_columns(jobs, contexts=args.contexts_dir is not None)
    todo, kept = resume_plan(jobs, args.output) if args.resume else (jobs, set())
    rows = run_jobs(todo, executor=args.executor, workers=args.workers, scheduler=args.scheduler, progress=True,
                    contexts_dir=args.contexts_dir)
    built, failed = _rows_written(args, rows, columns, jobs, kept)
    skipped = f", {len(jobs) - len(todo)} unchanged (kept)" if args.resume else ""
    if failed:
        _say(f"{failed} of {built} projects failed (the error column says why){skipped}")
        return 1
    _say(f"{built} projects built{skipped}" + (f"; wrote {args.output}" if args.output else ""))
    return 0


def _check_batch_args(args: argparse.Namespace) -> None:
    """Raise a CtxEngineError for batch options that do not go together, or an output that
    cannot be written (a wrong folder or file type fails now, not after the batch)."""
    from .batch_io import output_format

    if bool(args.projects) == (args.from_file is not None):
        raise CtxEngineError("batch: give PROJECT_DIR... or --from-file LIST (exactly one)")
    if args.scheduler is not None and args.executor != "dask":
        raise CtxEngineError("--scheduler joins a dask scheduler: add --executor dask")
    if args.resume and args.output is None:
        raise CtxEngineError("--resume reads the rows of -o FILE: give -o FILE")
    if args.output is not None:
        _check_outputs((args.output, "-o"))
        if args.resume and os.path.exists(args.output) and not os.path.isfile(args.output):  # a FIFO: reading blocks
            raise CtxEngineError(f"--resume reads the rows of -o {quoted(args.output)}, which is not a regular file; "
                                 "give a file or drop --resume")
        output_format(args.output)
    if args.contexts_dir is not None and not os.path.isdir(args.contexts_dir):
        raise CtxEngineError(f"--contexts-dir {quoted(args.contexts_dir)}: the folder does not exist; create it first")


def _batch_jobs(args: argparse.Namespace) -> list:
    """The batch's jobs, from --from-file or the PROJECT_DIR arguments, with the run's overrides
    (a note when no job has a request)."""
    from .api import build_overrides
    from .batch_io import jobs_from_paths, read_job_list

    overrides = build_overrides(_overrides(args), **_named(args))
    if args.from_file is not None:
        jobs = read_job_list(args.from_file, args.request, overrides)
    else:
        jobs = jobs_from_paths(_project_folders(args.projects), args.request, overrides)
    if not any(job.request.strip() for job in jobs):
        _warn_if_empty("", "use --request TEXT" + (" or a request column" if args.from_file else ""))
    return jobs


def _rows_written(args: argparse.Namespace, rows: Iterable[dict], columns: list, jobs: list, kept: set) -> tuple[int, int]:
    """(rows written, rows of failed projects): the batch's rows as CSV on stdout, or into -o
    FILE after the rows --resume kept."""
    from .batch_io import kept_rows, open_rows

    if args.output is None:
        writer = csv.DictWriter(_StdoutSink(), fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        built = failed = 0
        for row in rows:
            writer.writerow(row)
            built += 1
            failed += row["status"] != "ok"
        return built, failed
    with open_rows(args.output, columns) as out:
        for row in kept_rows(args.output, jobs, kept) if args.resume else ():
            out.write(row, count=False)
        for row in rows:
            out.write(row)
    return out.rows, out.failed


def _project_folders(paths: Sequence[str]) -> list[str]:
    """The PROJECT arguments of batch and experiment, files (a glob's MANIFEST.tsv) skipped with a note."""
    from .batch_io import project_folders

    kept, notes = project_folders(paths)
    for note in notes:
        _say(f"note: {note}")
    return kept


def _experiment(args: argparse.Namespace) -> int:
    from . import experiment as ex  # only this command runs experiments

    _check_outputs((args.output, "-o"), (args.chart, "--chart"))
    ex.results_format(args.output)  # a wrong file type, or .parquet without pyarrow, fails before the runs
    vary = dict(ex.parse_vary(text) for text in args.vary)
    facts = ex.read_facts(args.facts) if args.facts else None
    frame = ex.run_experiment(_project_folders(args.projects), vary, nodes=args.modules, request=args.request, overrides=_overrides(args),
                              facts=facts, executor=args.executor, workers=args.workers)
    ex.write_results(frame, args.output)
    _emit(ex.format_summary(ex.experiment_summary(frame)) + "\n")
    _say(f"{len(frame)} run{'' if len(frame) == 1 else 's'}; wrote {args.output}")
    if args.chart:
        _say(f"wrote {ex.draw_chart(frame, args.chart)}")
    failed = int((frame["status"] != "ok").sum())
    if failed:
        for error in frame.loc[frame["status"] != "ok", "error"].drop_duplicates().head(3):
            _say(f"error: {error}")
        _say(f"{failed} of {len(frame)} runs failed (the error column says why)")
        return 1
    return 0


def _serve(args: argparse.Namespace) -> int:
    from .serve import serve  # a CtxEngineError (exit 2) saying how to install mcp when it is missing

    serve(debug=bool(getattr(args, "debug", False)), allow_trust_overrides=args.allow_trust_overrides)
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{quoted(text)}: give a whole number of at least 1")
    return value


def _dag(args: argparse.Namespace) -> int:
    from .driver import default_driver
    from .viz.dag import write_dag

    _check_outputs((args.output, "-o"))
    written, note = write_dag(default_driver(), args.output, stage=args.stage)
    _say(f"wrote {written}" + (f" ({note})" if note else ""))
    return 0


def _cache_root(args: argparse.Namespace) -> Path:
    """The cache root of --cache-dir (relative to the working folder), else the user's."""
    from . import caching

    return caching.cache_root(None if args.cache_dir is None else os.path.abspath(args.cache_dir))


def _cache_folders(args: argparse.Namespace) -> list[Path]:
    """The project cache folders a `cache` action is about: one project's (PROJECT_DIR or
    --example) or every one ctxengine made in the root."""
    from . import caching

    if args.project_dir is not None or args.example is not None:
        given = None if args.cache_dir is None else os.path.abspath(args.cache_dir)
        return [caching.project_cache_dir(_project(args), given)]
    return caching.all_cache_dirs(_cache_root(args))


def _cache_stats(args: argparse.Namespace) -> int:
    """``ctxengine cache stats``: the cache folders' sizes, entries and last runs (a table, or
    JSON), then the total under the cache root against its cap."""
    from . import caching

    rows = [caching.stats(folder) for folder in _cache_folders(args)]
    root = _cache_root(args)
    size = sum(row["bytes"] for row in rows)
    every = args.project_dir is None and args.example is None  # the rows are the root's folders: sized once
    total = size if every else caching.total_bytes(root)
    cap = _total_cap()
    if args.format == "json":
        _emit(json.dumps({"root": str(root), "total_bytes": total, "max_total_bytes": cap,
                          "folders": rows}, indent=2) + "\n")
        return 0
    _emit(_cache_table(rows))
    stale = sum(row["stale"] for row in rows)
    _say(f"{len(rows)} cache folder{'' if len(rows) == 1 else 's'}, {size / 1e6:.2f} MB"
         + (f" ({stale} of projects that no longer exist: ctxengine cache clear --stale)" if stale else "")
         + f"; the cache under {root} holds {total / 1e6:.2f} MB of its {cap / 1e6:.0f} MB cap "
           "(cache.maxTotalBytes)")
    return 0


def _cache_table(rows: list[dict]) -> str:
    """The cache folders' rows of ``ctxengine cache stats`` as a text table: project (or folder,
    "(gone)" when the project no longer exists), size, entries and the last run's hits."""
    table = []
    for row in rows:
        last = row["last_run"]
        shown = f"{last['hits']} hits, {last['misses']} misses, {last['recomputed']} recomputed" if last else "-"
        name = (row["project"] or row["folder"]) + (" (gone)" if row["stale"] else "")
        table.append((name, f"{row['bytes'] / 1e6:.2f} MB", str(row["entries"]), shown))
    header = ("PROJECT", "SIZE", "ENTRIES", "LAST RUN")
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(3)]
    return "".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[3]]).rstrip() + "\n" for r in [header, *table])


def _total_cap() -> int:
    """``cache.maxTotalBytes`` from the defaults and the user's config file (no project's)."""
    from .nodes import config

    path = config.user_config_path()
    resolved = config.resolved_config(os.getcwd(), config.defaults(), {}, {}, config.user_config(path), path)
    return int(resolved.values["cache"]["maxTotalBytes"])


def _cache_clear(args: argparse.Namespace) -> int:
    from . import caching

    one = args.project_dir is not None or args.example is not None
    if one + args.all + args.stale > 1 or not (one or args.all or args.stale or args.cache_dir is not None):
        raise CtxEngineError("cache clear: give PROJECT_DIR (or --example NAME), --all or --stale (one of them), "
                             "or --cache-dir DIR alone for all of that folder's cache")
    folders = _cache_folders(args)
    if args.stale:
        folders = [folder for folder in folders if caching.stale(folder)]
    freed = sum(caching.clear(folder) for folder in folders)
    _say(f"cleared {len(folders)} cache folder{'' if len(folders) == 1 else 's'} ({freed / 1e6:.2f} MB)")
    return 0


def _check_outputs(*options: tuple[str | None, str]) -> None:
    """Each output path given, as (path, option), checked before any work: a wrong folder fails
    now, not after the build (None: not given).

    The writer (viz/output.py) is imported by this and :func:`_write` only, not with the CLI:
    with what it imports (tempfile, fcntl) it is about 8 ms of ``import ctxengine.cli``, which
    ``ctxengine --version`` and every build to stdout would pay for nothing."""
    given = [(path, option) for path, option in options if path is not None]
    if not given:  # a build to stdout: nothing to check, the writer stays unloaded
        return
    from .viz.output import check_output_path

    for path, option in given:
        check_output_path(path, option)


def _write(text: str, output: str | None, option: str = "-o") -> Path | None:
    """``text`` to stdout (``output`` None) or to the file of ``option`` (see :func:`_check_outputs`
    for why the writer is imported here); the path written (None: stdout)."""
    if output is None:
        _emit(text)
        return None
    from .viz.output import write_output

    return write_output(output, text, option)


class _StdoutSink:
    """A file-like stdout for row-by-row output: every write is flushed at once."""

    def write(self, text: str) -> int:
        _emit(text)
        return len(text)

    def flush(self) -> None:
        pass


def _emit(text: str) -> None:
    """Write ``text`` to stdout and flush; a closed or full stdout becomes :class:`_StdoutError`."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        raise _StdoutError(_stdout_problem(exc)) from None


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise _StdoutError(_stdout_problem(exc)) from None


def _stdout_problem(exc: OSError) -> str:
    if isinstance(exc, BrokenPipeError):
        return "stdout was closed before all the output was written"
    return f"cannot write to stdout ({exc.strerror or exc})"


def _silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so what is still buffered can never fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _say(message: str) -> None:
    """One line on stderr (a closed stderr is ignored: there is nowhere left to report)."""
    try:
        print(f"ctxengine: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def run() -> None:
    """The console script: :func:`main`, then a fast exit.

    The output is flushed first (a failure there is reported like any other: one line, exit 1);
    skipping the interpreter's teardown (pandas, numpy and a 100K-entry tokenizer table) saves
    about 0.1 s of every command.
    """
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C: KeyboardInterrupt, handled below
        code = main()
        try:
            _flush_stdout()
        except _StdoutError as exc:  # a last resort: main() flushes what it writes
            _silence_stdout()
            _say(f"error: {exc}")
            code = code or 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C cannot interrupt the report
        _say("interrupted")
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: nothing left to interrupt but the exit
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


# The start-up Ctrl-C guard holds until the whole module is defined (a signal while the
# definitions above run would otherwise escape as a traceback from the console script's import).
startup_guard.lift()

if __name__ == "__main__":  # pragma: no cover
    run()

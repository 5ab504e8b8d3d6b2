"""Experiments: every combination of settings (and node swaps) on every project, side by side.

    >>> import ctxengine
    >>> frame = ctxengine.experiment(["proj-a", "proj-b"], vary={"truncation.summarizer": ["extractive", "headings"],
    ...                                                           "budget.maxTokens": [4000, 8000]})
    >>> ctxengine.experiment.experiment_summary(frame)      # one row per variant

Each project and variant is one :class:`ctxengine.batch.Job`, run through the same executor as
``ctxengine batch`` (:func:`ctxengine.batch.run_jobs`), so a row has the batch columns (tokens,
utilisation, sections kept, summarized and dropped, time, facts kept) plus one column per varied
key and ``variant``, the short label of the combination. The key ``nodes`` varies node swaps:
its values are .py files of nodes (``none``: the built-in nodes), labelled by file name.
"""

from __future__ import annotations

import difflib
import io
import itertools
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from .batch import ROW_COLUMNS, Job, run_jobs
from .batch_io import parquet_module
from .nodes.config import defaults
from .nodes.lib.quote import quoted
from .nodes.types import CtxEngineError
from .options import parse_override
from .viz.output import write_output

#: The pseudo-key of ``vary`` that varies node swaps instead of a configuration value.
NODES_KEY = "nodes"
#: The value of a ``nodes`` variant that swaps nothing.
NO_SWAP = "none"
#: The figures of the summary table: column -> how it is aggregated over a variant's projects.
SUMMARY = {
    "tokens_before": "mean", "tokens_after": "mean", "utilisation": "mean", "sections_kept": "mean",
    "sections_summarized": "mean", "sections_dropped": "mean", "time_s": "mean",
}


def run_experiment(
    projects: Iterable[str | os.PathLike],
    vary: Mapping[str, Sequence[Any]],
    *,
    nodes: Sequence[Any] = (),
    request: str = "",
    overrides: Mapping[str, Any] | None = None,
    facts: str | os.PathLike | Sequence[str] | None = None,
    executor: str = "local",
    workers: int | None = None,
    scheduler: Any = None,
    progress: Callable[[dict], Any] | None = None,
):
    """A pandas DataFrame with one row per project and variant (every combination of the
    ``vary`` values: ``{"dotted.key": [a, b], "nodes": ["none", "mine.py"]}``). ``nodes``
    swaps nodes in every variant; ``overrides`` apply to every variant (a varied key wins);
    ``facts``: strings (or a file of them, one a line) counted in each final context."""
    variants = combinations(vary)
    varying = [key for key, values in vary.items() if len(values) > 1]
    shared = tuple(_swap_path(item) for item in nodes)
    fact_list = read_facts(facts) if isinstance(facts, (str, os.PathLike)) else tuple(facts or ())
    jobs = [job for project in projects
            for job in _jobs(project, variants, varying, shared, request, overrides, fact_list)]
    if not jobs:
        raise CtxEngineError("experiment: no projects given; name at least one project folder")
    rows = list(run_jobs(jobs, executor=executor, workers=workers, scheduler=scheduler, progress=progress))
    columns = [*ROW_COLUMNS, "variant", *vary]
    return pd.DataFrame(rows).reindex(columns=list(dict.fromkeys([*columns, *(c for r in rows for c in r)])))


def combinations(vary: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the ``vary`` values, in order (the first key varies slowest);
    an unknown configuration key is a CtxEngineError with the closest known keys."""
    if not vary:
        raise CtxEngineError("experiment: nothing to vary; give --vary key=a,b (e.g. truncation.summarizer=extractive,headings)")
    for key, values in vary.items():
        _check_key(key)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise CtxEngineError(f"experiment: vary {quoted(key)} needs a list of values, e.g. {{{key!r}: [a, b]}}")
    return [dict(zip(vary, values)) for values in itertools.product(*vary.values())]


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """``key=a,b,c`` from the CLI: each value read as a YAML scalar, like ``--set``."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or not raw.strip():
        raise CtxEngineError(f"--vary {quoted(text)}: write it as dotted.key=a,b, e.g. "
                             "--vary truncation.summarizer=extractive,headings")
    return key.strip(), [parse_override(f"{key}={part.strip()}")[1] for part in raw.split(",")]


def read_facts(path: str | os.PathLike) -> tuple[str, ...]:
    """The fact strings of a file: one a line; blank lines and lines starting with # are skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CtxEngineError(f"--facts {quoted(os.fspath(path))}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CtxEngineError(f"--facts {quoted(os.fspath(path))}: not UTF-8 text (bad byte at offset {exc.start})") from None
    facts = tuple(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if not facts:
        raise CtxEngineError(f"--facts {quoted(os.fspath(path))}: no facts in it; write one string to look for a line")
    return facts


def experiment_summary(frame):
    """One row per variant: projects, failed runs, the mean figures and, with facts, the share
    of facts kept over all projects (no ``facts_kept_pct`` column without facts)."""
    ok = frame[frame["status"] == "ok"]
    groups = frame.groupby("variant", sort=False)
    table = pd.DataFrame({"projects": groups.size(), "failed": groups["status"].apply(lambda s: int((s != "ok").sum()))})
    if not ok.empty:
        means = ok.groupby("variant", sort=False).agg({c: how for c, how in SUMMARY.items()})
        table = table.join(means.astype(float))
        if (ok["facts_total"].fillna(0) > 0).any():  # without facts every row counts 0 of 0
            kept = ok.groupby("variant", sort=False)[["facts_kept", "facts_total"]].sum()
            table["facts_kept_pct"] = 100.0 * kept["facts_kept"] / kept["facts_total"].where(kept["facts_total"] > 0)
    return table


def format_summary(table) -> str:
    """The summary table as text (figures rounded for reading)."""
    shown = table.copy()
    for column in shown.columns:
        if column == "utilisation":
            shown[column] = shown[column].map(lambda v: f"{v:.1%}")
        elif column == "time_s":
            shown[column] = shown[column].round(3)
        elif shown[column].dtype.kind == "f":
            shown[column] = shown[column].round(1)
    return shown.to_string()


def results_format(output: str | os.PathLike) -> str:
    """".csv" or ".parquet", from ``output``'s name (checked before any run): a CtxEngineError naming
    the file for any other name, or for .parquet without pyarrow (the extra ``parquet``)."""
    suffix = Path(output).suffix.lower()
    if suffix == ".parquet":
        parquet_module(output)
    elif suffix != ".csv":
        raise CtxEngineError(f"-o {quoted(os.fspath(output))}: write the results to a .csv or .parquet file")
    return suffix


def write_results(frame, output: str | os.PathLike) -> Path:
    """``frame`` to ``output`` (atomically for a file): .csv, or .parquet (pyarrow)."""
    if results_format(output) == ".csv":
        return write_output(output, frame.to_csv(index=False), "-o")
    return write_output(output, frame.to_parquet(index=False), "-o")


def draw_chart(frame, output: str | os.PathLike) -> Path:
    """A PNG of the main figures per variant (means over the projects): tokens after
    truncation, utilisation, sections summarized and dropped, and facts kept (with facts) or
    build time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if Path(output).suffix.lower() != ".png":
        raise CtxEngineError(f"--chart {quoted(os.fspath(output))}: the chart is a .png file")
    table = experiment_summary(frame)
    labels = [str(v) for v in table.index]
    panels = chart_panels(table)
    height = 2 * (1.2 + 0.32 * len(labels))
    figure, axes = plt.subplots(2, 2, figsize=(12, height), constrained_layout=True, sharey=True)
    positions = list(range(len(labels)))[::-1]  # the first variant on top
    for ax, (column, title) in zip(axes.flat, panels):
        if isinstance(column, tuple):
            width = 0.4
            for shift, name, colour in ((width / 2, column[0], "#4c72b0"), (-width / 2, column[1], "#dd8452")):
                values = table[name] if name in table else [0] * len(labels)
                ax.barh([p + shift for p in positions], values, width, label=name.split("_")[1], color=colour)
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.barh(positions, table[column] if column in table else [0] * len(labels), color="#55a868")
        ax.set_title(title, fontsize=10)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    projects = frame["project"].nunique()
    figure.suptitle(f"ctxengine experiment: {len(labels)} variants x {projects} project{'s' if projects != 1 else ''}"
                    " (means over the projects)", fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return write_output(output, buffer.getvalue(), "--chart")


def chart_panels(summary) -> list[tuple[Any, str]]:
    """(column or pair of columns, title) of the chart's four panels for an
    :func:`experiment_summary` table: the facts-kept panel only when facts were counted, else
    the build time."""
    last = ("facts_kept_pct", "facts kept (%)") if "facts_kept_pct" in summary else ("time_s", "build time (s)")
    return [("tokens_after", "tokens after truncation"), ("utilisation", "utilisation of the budget"),
            (("sections_summarized", "sections_dropped"), "sections summarized / dropped"), last]


def _jobs(project, variants: list[dict], varying: Sequence[str], shared: tuple, request: str, overrides: Mapping[str, Any] | None,
          facts: tuple[str, ...]) -> list:
    jobs = []
    for variant in variants:
        settings = {key: value for key, value in variant.items() if key != NODES_KEY}
        swaps = _variant_swaps(variant.get(NODES_KEY, NO_SWAP))
        labels = {"variant": _label(variant, varying), **{key: _shown(key, value) for key, value in variant.items()}}
        jobs.append(Job(project=os.fspath(project), request=request, overrides={**dict(overrides or {}), **settings},
                        nodes=shared + swaps, labels=labels, facts=facts))
    return jobs


def _variant_swaps(value: Any) -> tuple:
    if value is None or (isinstance(value, str) and value.strip().lower() in (NO_SWAP, "")):
        return ()
    items = value if isinstance(value, (list, tuple)) else [value]
    return tuple(_swap_path(item) for item in items)


def _swap_path(item: Any) -> Any:
    """A swap as a job carries it: a module becomes the path of its file (a path pickles to a
    process worker); a function stays as it is (local executor only)."""
    file = getattr(item, "__file__", None)
    return file if file else os.fspath(item) if isinstance(item, os.PathLike) else item


def _label(variant: Mapping[str, Any], varying: Sequence[str]) -> str:
    """``summarizer=headings strategy=tail``: the keys that take more than one value (all when
    none does), each by its last part unless two share it."""
    keys = [key for key in variant if key in varying] or list(variant)
    lasts = [key.rsplit(".", 1)[-1] for key in keys]
    names = lasts if len(set(lasts)) == len(lasts) else keys
    return " ".join(f"{name}={_shown(key, variant[key])}" for name, key in zip(names, keys))


def _shown(key: str, value: Any) -> str:
    if key == NODES_KEY:
        items = value if isinstance(value, (list, tuple)) else [value]
        return "+".join(Path(_swap_path(i)).stem if isinstance(_swap_path(i), str) else getattr(i, "__name__", str(i))
                        for i in items) or NO_SWAP
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_key(key: str) -> None:
    """A varied key must be a configuration key of configs/defaults.yaml (or ``nodes``)."""
    if key == NODES_KEY:
        return
    known = sorted(_dotted_keys(defaults()))
    if key in known:
        return
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise CtxEngineError(f"--vary {quoted(key)}: not a configuration key{hint} (or 'nodes' for .py files of nodes)")


def _dotted_keys(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for name, value in tree.items():
        dotted = f"{prefix}{name}"
        keys.append(dotted)
        if isinstance(value, Mapping):
            keys.extend(_dotted_keys(value, dotted + "."))
    return keys


class _CallableModule(types.ModuleType):
    """This module is callable: ``ctxengine.experiment(...)`` is :func:`run_experiment`, whether
    the name resolves to this module (``import ctxengine.experiment``) or not."""

    def __call__(self, *args: Any, **kwargs: Any):
        return run_experiment(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
experiment = sys.modules[__name__]  # ctxengine.experiment(projects, vary=...) -> DataFrame

"""Batch builds over many projects: one reused driver, one row per project, errors as rows.

A broken project is a row with its error message, never a crash of the batch, and Hamilton
logs no traceback for it. Rows come one at a time (:func:`iter_records`), so a caller can
write each as it finishes. For more than one machine, run the same loop per worker
(Hamilton's Dask or Ray adapters); the driver is built once per process either way.
"""

from __future__ import annotations

import csv
import os
import sys
import traceback
from typing import IO, Any, Iterable, Iterator, Mapping

from . import driver
from .nodes.types import CtxEngineError

#: The columns of a run record (nodes/report.py ``run_record``), in CSV order.
RECORD_COLUMNS = (
    "project_dir", "total_tokens", "available_tokens", "utilization_rate", "is_over_budget",
    "sections", "truncated", "warnings", "error",
)


def build_record(
    project_dir: str | os.PathLike, request: str = "", overrides: Mapping[str, Any] | None = None, *, debug: bool = False
) -> dict:
    """The run record of one project, or a row naming the error when it cannot be built
    (``debug``: the traceback of an unexpected error also goes to stderr)."""
    try:
        with driver.quiet_failures():
            return driver.execute(["run_record"], project_dir, overrides, request)["run_record"]
    except CtxEngineError as exc:
        return _error_row(project_dir, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a batch reports every failure as a row
        if debug:
            traceback.print_exc(file=sys.stderr)
        return _error_row(project_dir, f"internal error {type(exc).__name__}: {exc}")


def iter_records(
    projects: Iterable[str | os.PathLike], request: str = "", overrides: Mapping[str, Any] | None = None,
    *, debug: bool = False,
) -> Iterator[dict]:
    """One run record per project, each yielded as soon as it is built."""
    for project in projects:
        yield build_record(project, request, overrides, debug=debug)


def build_many(projects: Iterable[str | os.PathLike], request: str = "", overrides: Mapping[str, Any] | None = None):
    """A pandas DataFrame with one run record per project (the ``error`` column is None on success)."""
    import pandas as pd

    frame = pd.DataFrame(list(iter_records(projects, request, overrides)))
    # integer columns stay integers (nullable) when a failed project leaves them empty
    counts = ["total_tokens", "available_tokens", "sections", "warnings"]
    return frame.astype({c: "Int64" for c in counts if c in frame.columns})


def write_records(records: Iterable[dict], out: IO[str]) -> tuple[int, int]:
    """Write ``records`` as CSV to ``out``, flushing after every row; (rows, failed rows)."""
    writer = csv.DictWriter(out, fieldnames=RECORD_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    out.flush()
    rows = failed = 0
    for record in records:
        writer.writerow(record)
        out.flush()
        rows += 1
        failed += record.get("error") is not None
    return rows, failed


def _error_row(project_dir: str | os.PathLike, message: str) -> dict:
    return {"project_dir": os.path.abspath(os.fspath(project_dir)), "error": message}


# interim: the batch branch replaces this at merge
# (the interface ``ctxengine experiment`` runs on: Job, run_jobs and their row columns; sequential here)

import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

#: The columns of a job row, in order (a job's labels follow).
JOB_COLUMNS = (
    "project", "status", "error", "tokens_before", "tokens_after", "utilisation", "truncated", "sections_kept",
    "sections_summarized", "sections_dropped", "position", "time_s", "cache_hits", "facts_kept", "facts_total",
)


@dataclass(frozen=True)
class Job:
    """One build of a batch: a project, its request, dotted-key overrides, node swaps (paths of
    .py files, so a job pickles to process workers), labels copied into its row, and fact
    strings counted in the final context."""

    project: str
    request: str = ""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    nodes: tuple[str, ...] = ()
    labels: Mapping[str, Any] = field(default_factory=dict)
    facts: tuple[str, ...] = ()


def run_jobs(jobs: Iterable[Job], *, executor: str = "local", workers: int | None = None, scheduler: Any = None,
             progress: Any = None) -> Iterator[dict]:
    """One row per job (columns :data:`JOB_COLUMNS`, then the job's labels), in order, each
    yielded when built; a failed build is a row with status "error" and its message.
    ``progress``: called with each row."""
    if executor != "local":
        raise CtxEngineError(f"executor {executor!r} is not available in this build; use executor='local'")
    for job in jobs:
        row = run_job(job)
        if progress is not None:
            progress(row)
        yield row


def run_job(job: Job) -> dict:
    """The row of one job (see :func:`run_jobs`)."""
    row: dict[str, Any] = dict.fromkeys(JOB_COLUMNS)
    row.update(project=os.path.abspath(os.fspath(job.project)), status="ok")
    start = time.perf_counter()
    try:
        with driver.quiet_failures():
            result = driver.execute(["build_result"], job.project, job.overrides, job.request,
                                    nodes=job.nodes)["build_result"]
    except Exception as exc:  # noqa: BLE001 - every failure is a row
        kind = "" if isinstance(exc, CtxEngineError) else "internal error "
        row.update(status="error", error=f"{kind}{type(exc).__name__}: {exc}")
    else:
        row.update(_result_columns(result, job.facts))
        summary = driver.last_cache_run()
        row["cache_hits"] = len(summary.hits) if summary is not None else None
    row["time_s"] = round(time.perf_counter() - start, 4)
    row.update(job.labels)
    return row


def _result_columns(result, facts: tuple[str, ...]) -> dict:
    """The figures of one build: kept = untouched by truncation, summarized = in the context
    but shortened (summarized, compacted or cut), dropped = left out of the context."""
    final = {s.key for s in result.sections}
    touched = {e.section_key for e in result.ledger if e.action != "kept"}
    everyone = final | {e.section_key for e in result.ledger}
    position = result.position
    return {
        "tokens_before": (result.initial_budget or result.budget).total_tokens,
        "tokens_after": result.budget.total_tokens,
        "utilisation": result.budget.utilization_rate,
        "truncated": bool(result.truncation.get("triggered", False)),
        "sections_kept": len(final - touched),
        "sections_summarized": len(final & touched),
        "sections_dropped": len(everyone - final),
        "position": f"phase {position['phase']}, plan {position.get('plan') or '-'}" if position.get("phase") else "",
        "facts_kept": sum(fact in result.context for fact in facts) if facts else None,
        "facts_total": len(facts) if facts else None,
    }

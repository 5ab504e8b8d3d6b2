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

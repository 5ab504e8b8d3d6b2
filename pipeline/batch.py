"""Batch builds over many projects: one reused driver, one row per project, errors as rows.

A broken project is a row with its error message, never a crash of the batch. For more than
one machine, run the same loop per worker (Hamilton's Dask or Ray adapters); the driver is
built once per process either way.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from . import driver
from .nodes.types import CtxEngineError


def build_record(project_dir: str | os.PathLike, request: str = "", overrides: Mapping[str, Any] | None = None) -> dict:
    """The run record of one project, or a row naming the error when it cannot be built."""
    try:
        return driver.execute(["run_record"], project_dir, overrides, request)["run_record"]
    except CtxEngineError as exc:
        return _error_row(project_dir, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a batch reports every failure as a row
        return _error_row(project_dir, f"internal error {type(exc).__name__}: {exc}")


def build_many(projects: Iterable[str | os.PathLike], request: str = "", overrides: Mapping[str, Any] | None = None):
    """A pandas DataFrame with one run record per project (the ``error`` column is None on success)."""
    import pandas as pd

    frame = pd.DataFrame([build_record(p, request, overrides) for p in projects])
    # integer columns stay integers (nullable) when a failed project leaves them empty
    counts = ["total_tokens", "available_tokens", "sections", "warnings"]
    return frame.astype({c: "Int64" for c in counts if c in frame.columns})


def _error_row(project_dir: str | os.PathLike, message: str) -> dict:
    return {"project_dir": os.path.abspath(os.fspath(project_dir)), "error": message}

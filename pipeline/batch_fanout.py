"""The batch as a Hamilton graph: a Parallelizable over jobs, one task per job, collected.

Used by ``run_jobs(executor="dask-hamilton")`` with Hamilton's Dask integration
(``hamilton.plugins.h_dask.DaskExecutor``) running the tasks; ctxengine.batch measures it
against ``client.map`` (the default). Not one of the stage modules of the context build.
"""

from __future__ import annotations

from typing import Any

from hamilton.function_modifiers import tag
from hamilton.htypes import Collect, Parallelizable


@tag(stage="batch")
def batch_job(batch_jobs: list) -> Parallelizable[Any]:
    """Each job of the window, as its own task."""
    yield from batch_jobs


@tag(stage="batch")
def batch_row(batch_job: Any, batch_settings: Any) -> dict:
    """The row of one job, built by the worker's own driver."""
    from .batch import _run_chunk

    return _run_chunk([batch_job], batch_settings)[0]


@tag(stage="batch")
def batch_rows(batch_row: Collect[dict]) -> list:
    """The rows of the window."""
    return list(batch_row)

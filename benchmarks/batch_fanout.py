"""The yardstick of ``ctxengine batch --executor dask``: the same jobs through Hamilton's own Dask
integration, a Parallelizable over the jobs with ``hamilton.plugins.h_dask.DaskExecutor`` running
one task per job (benchmarks/batch.py, row "dask via Hamilton").

Measured with 2 workers on the shared 2-core machine (load 5-10 from other work): 105 projects,
client.map 6.1/s against Hamilton's 3.0/s; on 1005 Hamilton's route had not finished after 15 min,
its driver process busy at 84% CPU planning and collecting tasks. Hamilton keeps a window's rows
until its Collect, so rows cannot stream; client.map (the product's route) streams them as done.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

from hamilton.function_modifiers import tag
from hamilton.htypes import Collect, Parallelizable


@tag(stage="batch")
def batch_job(batch_jobs: list) -> Parallelizable[Any]:
    """Each job of the window, as its own task."""
    yield from batch_jobs


@tag(stage="batch")
def batch_row(batch_job: Any) -> dict:
    """The row of one job, built by the worker's own driver."""
    from ctxengine.batch import run_job

    return run_job(batch_job)


@tag(stage="batch")
def batch_rows(batch_row: Collect[dict]) -> list:
    """The rows of the window."""
    return list(batch_row)


def hamilton_dask_rows(jobs: list, workers: int) -> Iterator[dict]:
    """The rows of ``jobs`` on a LocalCluster of ``workers`` processes, one Hamilton run per window
    of ``workers * 16`` jobs (Collect returns a window's rows together)."""
    import sys

    from distributed import Client, LocalCluster
    from hamilton import driver as h_driver
    from hamilton.execution import executors
    from hamilton.plugins import h_dask

    from ctxengine.batch import warm_worker

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(warm_worker)  # one driver per worker, built before the first job
        dr = (h_driver.Builder().enable_dynamic_execution(allow_experimental_mode=True)
              .with_modules(sys.modules[__name__])
              .with_local_executor(executors.SynchronousLocalTaskExecutor())
              .with_remote_executor(h_dask.DaskExecutor(client=client)).build())
        window = iter(jobs)
        while chunk := list(itertools.islice(window, workers * 16)):
            yield from dr.execute(["batch_rows"], inputs={"batch_jobs": chunk})["batch_rows"]

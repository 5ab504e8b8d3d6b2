"""Batch builds over many projects: jobs in, one row per job out, as each finishes.

:func:`run_jobs` runs :class:`Job` s through one of three executors, each reusing one driver per
process (pipeline/driver.py): ``local`` (this process), ``processes`` (a process pool, one
driver per worker, built by the pool's initializer) and ``dask`` (``client.map`` over a
``distributed`` cluster, one driver per worker; about twice as fast as Hamilton's own Dask
executor, which cannot stream rows: benchmarks/batch.py, benchmarks/batch_fanout.py). A broken
project is a row with its error, never a crash of the batch, and Hamilton logs no traceback for
it. Rows are yielded as they finish and nothing is kept, so memory stays flat however long the
batch; at most a few chunks per worker are in flight.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing
import os
import re
import signal
import sys
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from tqdm import tqdm

from . import caching, driver
from .api import check_request
from .nodes.config import user_config_path
from .nodes.lib.tokens import token_counter_for
from .nodes.types import CtxEngineError
from .viz.output import write_output

#: The columns of a row of :func:`run_jobs`, in file order; a job's labels follow them.
ROW_COLUMNS = (
    "project", "status", "error", "tokens_before", "tokens_after", "utilisation", "truncated",
    "sections_kept", "sections_summarized", "sections_dropped", "position", "time_s", "cache_hits",
    "facts_kept", "facts_total", "fingerprint",
)
#: The extra column naming the file a context went to (``contexts_dir``).
CONTEXT_FILE_COLUMN = "context_file"
EXECUTORS = ("local", "processes", "dask")
#: Seconds to wait for a dask scheduler given by address before the batch gives up.
SCHEDULER_TIMEOUT = 20


@dataclass(frozen=True)
class Job:
    """One build of a batch: a project, the request and overrides (dotted keys) to build it with,
    ``nodes`` (paths of .py files swapping nodes), ``labels`` copied into its row, and ``facts``
    (strings looked for in the final context: ``facts_kept`` of ``facts_total``)."""

    project: str
    request: str = ""
    overrides: Mapping = field(default_factory=dict)
    nodes: tuple[str, ...] = ()
    labels: Mapping = field(default_factory=dict)
    facts: tuple[str, ...] = ()


def run_jobs(
    jobs: Iterable[Job],
    *,
    executor: str = "local",
    workers: int | None = None,
    scheduler: Any = None,
    progress: Any = None,
    contexts_dir: str | os.PathLike | None = None,
    chunksize: int | None = None,
) -> Iterator[dict]:
    """Build every job and yield its row (:data:`ROW_COLUMNS` plus its labels) as it finishes
    (in completion order for the parallel executors).

    ``workers``: processes (default: the CPU count); ``scheduler``: for ``dask``, the address of
    a running scheduler (``tcp://HOST:PORT``) or a ``distributed.Client`` (default: a
    LocalCluster of ``workers`` processes on 127.0.0.1, closed at the end). ``progress``: True
    for a tqdm bar when stderr is a terminal, or a callable given each row. ``contexts_dir``:
    each final context is written there (:func:`context_file_name`), its name in the row's
    ``context_file``. ``chunksize``: jobs per task sent to a worker (default: small, so rows
    come back steadily).
    """
    if executor not in EXECUTORS:
        raise CtxEngineError(f"executor {executor!r}: choose one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise CtxEngineError(f"workers={workers}: give at least 1 worker")
    total = len(jobs) if hasattr(jobs, "__len__") else None
    settings = _Settings(os.fspath(contexts_dir) if contexts_dir is not None else None,
                         dict(driver._CACHE_DEFAULTS))
    if executor == "local":
        rows = (run_job(job, settings.contexts_dir) for job in jobs)
    else:
        workers = workers or os.cpu_count() or 1
        size = chunksize or _chunksize(total, workers)
        chunks = _chunks(iter(jobs), size)
        if executor == "processes":
            rows = _process_rows(chunks, workers, settings)
        else:
            rows = _dask_rows(chunks, workers, scheduler, settings)
    yield from _with_progress(rows, progress, total)


def run_job(job: Job, contexts_dir: str | None = None) -> dict:
    """The row of one job; a failure is a row with ``status`` "error" and the message."""
    started = time.perf_counter()
    row = {"project": os.path.abspath(os.fspath(job.project)), "status": "ok", "error": None}
    try:
        row["fingerprint"] = job_fingerprint(job)
        check_request(job.request)  # a NUL or lone surrogate: this row's error, not a failed write later
        extra = {"nodes": job.nodes} if job.nodes else {}
        with driver.quiet_failures():
            result = driver.execute(["build_result"], job.project, dict(job.overrides), job.request, **extra)["build_result"]
        row.update(_result_columns(result, job.facts))
        if contexts_dir is not None:
            row[CONTEXT_FILE_COLUMN] = _write_context(contexts_dir, job, result.context)
    except CtxEngineError as exc:
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a batch reports every failure as a row
        row.update(status="error", error=f"internal error {type(exc).__name__}: {exc}")
    row["time_s"] = round(time.perf_counter() - started, 4)
    return {**{column: row.get(column) for column in ROW_COLUMNS}, **_extra(row), **dict(job.labels)}


def job_fingerprint(job: Job) -> str:
    """A digest of what a build of ``job`` reads: every file of the project (path, size and
    mtime; git's object store is stood for by its refs and index), the user configuration, the
    node files swapped in, the request, overrides, facts and labels, and ctxengine's code version. The
    same digest means the same inputs (files outside the project and URLs are not covered)."""
    digest = hashlib.blake2b(digest_size=16)
    described = {"request": job.request, "overrides": dict(job.overrides), "facts": list(job.facts),
                 "labels": dict(job.labels), "nodes": list(job.nodes), "version": caching.code_version()}
    digest.update(json.dumps(described, sort_keys=True, default=repr).encode())
    for path in (user_config_path(), *job.nodes):
        digest.update(f"\0{path}\0{_stat_key(path)}".encode("utf-8", "surrogateescape"))
    root = os.path.abspath(os.fspath(job.project))
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if os.path.basename(folder) == ".git" and "objects" in dirs:
            dirs.remove("objects")
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(f"\0{os.path.relpath(path, root)}\0{_stat_key(path)}".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def context_file_name(job: Job) -> str:
    """A safe file name for the context of ``job``: the project's folder name (letters, digits,
    ``.-_`` only) and a short digest of the project path, request, overrides and labels."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(os.path.abspath(os.fspath(job.project)))).strip("._")
    key = json.dumps([os.path.abspath(os.fspath(job.project)), job.request, dict(job.overrides), dict(job.labels),
                      list(job.nodes)], sort_keys=True, default=repr)
    return f"{base[:60] or 'project'}-{hashlib.sha1(key.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}.md"


# ----------------------------------------------------------------------------- one job's row


@dataclass(frozen=True)
class _Settings:
    """What every worker needs besides the jobs: where contexts go and the cache defaults."""

    contexts_dir: str | None
    cache: Mapping[str, Any]


def _result_columns(result, facts: tuple[str, ...]) -> dict:
    final = {section.key for section in result.sections}
    changed = {entry.section_key for entry in result.ledger if entry.action != "kept"}
    every = {entry.section_key for entry in result.ledger} | final
    truncated = bool(result.truncation.get("triggered", False))
    # untruncated, the context is the one assembled: its exact count (the first report may be the
    # chars/4 estimate of a context far under the budget)
    initial = result.initial_budget if truncated and result.initial_budget is not None else result.budget
    hits = driver.last_cache_run()
    return {
        "tokens_before": initial.total_tokens,
        "tokens_after": result.budget.total_tokens,
        "utilisation": result.budget.utilization_rate,
        "truncated": truncated,
        "sections_kept": len(final - changed),
        "sections_summarized": len(final & changed),
        "sections_dropped": len(every - final),
        "position": _position(result.position),
        "cache_hits": len(hits.hits) if hits is not None else 0,
        "facts_kept": sum(fact in result.context for fact in facts),
        "facts_total": len(facts),
    }


def _position(position: Mapping[str, Any]) -> str:
    """The GSD position in one short string ("v1.0 phase 2 plan 02-02"), "" outside GSD."""
    if not position:
        return ""
    parts = [position.get("milestone"), f"phase {position['phase']}" if position.get("phase") else None,
             f"plan {position['plan']}" if position.get("plan") else None]
    return " ".join(str(part) for part in parts if part)


def _write_context(folder: str, job: Job, context: str) -> str:
    path = os.path.join(folder, context_file_name(job))
    write_output(path, context, "--contexts-dir")
    return path


def _extra(row: dict) -> dict:
    return {CONTEXT_FILE_COLUMN: row[CONTEXT_FILE_COLUMN]} if CONTEXT_FILE_COLUMN in row else {}


def _stat_key(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


# ----------------------------------------------------------------------------- executors


def _chunksize(total: int | None, workers: int) -> int:
    """Jobs per task: about eight tasks per worker over the batch, at most 8 jobs (a row waits
    for its chunk) and at least 1."""
    if total is None:
        return 4
    return max(1, min(8, total // (workers * 8)))


def _chunks(jobs: Iterator[Job], size: int) -> Iterator[list[Job]]:
    while chunk := list(itertools.islice(jobs, size)):
        yield chunk


def _run_chunk(chunk: list[Job], settings: _Settings) -> list[dict]:
    """A worker's task: the rows of a chunk of jobs, through this process's driver."""
    driver.set_cache_defaults(**settings.cache)
    return [run_job(job, settings.contexts_dir) for job in chunk]


def _init_worker() -> None:
    """A pool worker: Ctrl-C is the parent's to handle; build the driver and tokenizer once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm_worker()


def warm_worker() -> None:
    """Build the driver and load the default tokenizer now (a failure here is left to the first job)."""
    try:
        driver.default_driver()
        token_counter_for("cl100k_base").count("warm")
    except Exception:  # noqa: BLE001 - warming is an optimisation; the job reports the real error
        pass


def _bounded(submit: Callable[[list[Job]], Any], chunks: Iterator[list[Job]], window: int,
             wait_one: Callable[[set], tuple[set, set]]) -> Iterator[Any]:
    """Keep at most ``window`` chunks in flight; yield each finished future as it completes."""
    pending: set = set()
    for chunk in itertools.chain(chunks, [None]):
        if chunk is not None:
            pending.add(submit(chunk))
            if len(pending) < window:
                continue
        while pending and (chunk is None or len(pending) >= window):
            done, pending = wait_one(pending)
            yield from done


def _process_rows(chunks: Iterator[list[Job]], workers: int, settings: _Settings) -> Iterator[dict]:
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    pool = futures.ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker)
    try:
        finished = _bounded(lambda chunk: pool.submit(_run_chunk, chunk, settings), chunks, workers * 3,
                            lambda pending: futures.wait(pending, return_when=futures.FIRST_COMPLETED))
        for future in finished:
            yield from future.result()
        pool.shutdown(wait=True)
    except BaseException:  # Ctrl-C or the caller stopped early: no worker outlives the batch
        _stop_pool(pool)
        raise


def _stop_pool(pool: futures.ProcessPoolExecutor) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5)


def _dask_rows(chunks: Iterator[list[Job]], workers: int, scheduler: Any, settings: _Settings) -> Iterator[dict]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CtxEngineError("--executor dask needs the dask extra: pip install 'ctxengine[dask]'") from None
    cluster = None
    if isinstance(scheduler, Client):
        client, own_client = scheduler, False
    else:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None)
            scheduler = cluster
        try:
            client, own_client = Client(scheduler, timeout=SCHEDULER_TIMEOUT), True
        except (OSError, TimeoutError) as exc:
            if cluster is not None:
                cluster.close()
            raise CtxEngineError(f"--scheduler {scheduler!r}: cannot connect ({exc}); "
                                 "give the address of a running dask scheduler, e.g. tcp://127.0.0.1:8786") from None
    try:
        client.run(warm_worker)  # one driver per worker, built before the first job
        yield from _client_map_rows(client, chunks, workers, settings)
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()


def _client_map_rows(client, chunks: Iterator[list[Job]], workers: int, settings: _Settings) -> Iterator[dict]:
    from distributed import wait

    def submit(chunk: list[Job]):
        return client.map(_run_chunk, [chunk], settings=settings, pure=False)[0]

    def wait_one(pending: set) -> tuple[set, set]:
        done = wait(list(pending), return_when="FIRST_COMPLETED").done
        return set(done), pending - set(done)

    for future in _bounded(submit, chunks, workers * 3, wait_one):
        yield from future.result()  # the future goes with its last reference: nothing stays on the cluster


def _with_progress(rows: Iterator[dict], progress: Any, total: int | None) -> Iterator[dict]:
    if callable(progress):
        for row in rows:
            progress(row)
            yield row
        return
    if not progress or not sys.stderr.isatty():
        yield from rows
        return
    with tqdm(total=total, unit="project", file=sys.stderr, dynamic_ncols=True) as bar:
        failed = 0
        for row in rows:
            failed += row["status"] != "ok"
            bar.update(1)
            if failed:
                bar.set_postfix(failed=failed, refresh=False)
            yield row

"""The files of ``ctxengine batch``: job lists in, result rows out, and what --resume skips.

Job lists (``--from-file``), by extension: ``.csv`` (a header with a ``project`` column; columns
``request``, ``mode``, ``phase``, ``overrides`` (a JSON object), any ``dotted.key`` column an
override, any other column a label), ``.jsonl`` / ``.ndjson`` (one object a line: ``project``,
``request``, ``mode``, ``phase``, ``overrides``, ``labels``, ``facts``), else text (a project
path a line; blank lines and lines starting with ``#`` are skipped). Relative project paths are
relative to the list file's folder. A bad line is a :class:`JobListError` naming ``file:line``.

Result files (``-o``), by extension: ``.csv`` and ``.jsonl`` are written row by row (flushed,
so a crash or Ctrl-C keeps every finished row), ``.parquet`` in row groups of
:data:`PARQUET_ROW_GROUP` rows. A file is written to a temporary file and renamed (Ctrl-C
still renames); a FIFO or device in place (:mod:`ctxengine.viz.output`). Nothing is kept in memory but the rows of one parquet row group.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
from typing import IO, Any, Iterable, Iterator, Mapping, Sequence

from .batch import CONTEXT_FILE_COLUMN, ROW_COLUMNS, Job, job_fingerprint
from .api import build_overrides
from .nodes.lib.quote import quoted
from .nodes.types import CtxEngineError
from .options import MODES, PHASES, parse_override
from .viz.output import output_file

OUTPUT_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
PARQUET_ROW_GROUP = 512
#: Job fields a list line may give besides the project (JSONL keys, CSV columns).
JOB_KEYS = ("project", "request", "mode", "phase", "overrides", "labels", "facts")


class JobListError(CtxEngineError):
    """A job list that cannot be read: names the file and line and says how to fix it (exit 2)."""


# ----------------------------------------------------------------------------- job lists


def read_job_list(path: str | os.PathLike, request: str = "", overrides: Mapping[str, Any] | None = None) -> list[Job]:
    """The jobs of a list file; ``request`` and ``overrides`` are the defaults a line can change."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise JobListError(f"--from-file {quoted(path)}: cannot read it ({exc.strerror}); give an existing list file") from None
    except UnicodeDecodeError as exc:
        raise JobListError(f"--from-file {quoted(path)}: not UTF-8 text (bad byte at offset {exc.start})") from None
    suffix = os.path.splitext(path)[1].lower()
    entries = list(_csv_entries(path, lines) if suffix == ".csv" else _jsonl_entries(path, lines)
                   if suffix in (".jsonl", ".ndjson") else _text_entries(lines))
    base = os.path.dirname(os.path.abspath(path))
    jobs = [_job(f"{path}:{number}", fields, base, request, overrides or {}) for number, fields in entries]
    if not jobs:
        raise JobListError(f"--from-file {quoted(path)}: no projects in it; give one project path a line")
    return _label_choices(jobs, [fields for _, fields in entries])


def project_folders(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(paths kept, notes): the PROJECT arguments of ``batch`` and ``experiment`` without the
    ones that are files, not folders (a shell glob such as ``corpus/*`` also names
    ``corpus/MANIFEST.tsv``), each skipped with a note. A path that does not exist is kept: its
    row says so, as for any project that cannot be built."""
    kept, notes = [], []
    for path in paths:
        if os.path.lexists(path) and not os.path.isdir(path):
            notes.append(f"{path} is a file, not a project folder; skipped")
        else:
            kept.append(path)
    if notes and not kept:
        raise JobListError(f"no project folders given ({notes[0]}); name project folders")
    return kept, notes


def jobs_from_paths(paths: Sequence[str], request: str = "", overrides: Mapping[str, Any] | None = None) -> list[Job]:
    """One job per project folder given on the command line."""
    return [Job(project=path, request=request, overrides=dict(overrides or {})) for path in paths]


def _text_entries(lines: list[str]) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if text and not text.startswith("#"):
            yield number, {"project": text}


def _jsonl_entries(path: str, lines: list[str]) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        fields = _json_object(where, line, "the line", '{"project": "path/to/project", "request": "..."}')
        unknown = sorted(set(fields) - set(JOB_KEYS))
        if unknown:
            raise JobListError(f"{where}: unknown key {quoted(unknown[0])}; the keys are {', '.join(JOB_KEYS)}")
        yield number, fields


def _csv_entries(path: str, lines: list[str]) -> Iterator[tuple[int, dict]]:
    """(line number, job fields) of each CSV row that is not blank, by its header's columns."""
    reader = csv.reader(lines)
    header = _csv_header(path, next(reader, None))
    for number, cells in enumerate(reader, 2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise JobListError(f"{path}:{number}: {len(cells)} cells for {len(header)} columns; "
                               "quote a cell that holds a comma")
        yield number, _csv_fields(f"{path}:{number}", header, cells)


def _csv_header(path: str, header: list[str] | None) -> list[str]:
    """The CSV list's column names (stripped); a JobListError when there is no 'project' column."""
    names = [name.strip() for name in header or ()]
    if "project" not in names:
        raise JobListError(f"{path}:1: a CSV job list needs a header line naming a 'project' column "
                           "(and optionally request, mode, phase, overrides, dotted.config.keys, labels)")
    return names


def _csv_fields(where: str, header: list[str], cells: list[str]) -> dict[str, Any]:
    """The job fields of one CSV row: its overrides (the JSON object of an ``overrides`` column,
    then each dotted column's value), project / request / mode / phase, and labels (any other column)."""
    fields: dict[str, Any] = {"overrides": {}, "labels": {}}
    for name, cell in zip(header, cells):
        placed = _placed_cell(where, name, cell)
        if placed is None:
            continue
        group, key, value = placed
        if group is None:
            fields[key] = value
        elif key is None:
            fields[group].update(value)
        else:
            fields[group][key] = value
    return fields


def _placed_cell(where: str, name: str, cell: str) -> tuple[str | None, str | None, Any] | None:
    """Where a CSV cell goes, as (group, key, value): ("overrides", None, object) for the overrides
    column, (None, name, text) for a job field, ("overrides", name, value) for a dotted key,
    ("labels", name, text) for a label; None for an empty cell that is no label."""
    if name == "overrides":
        return ("overrides", None, _json_object(where, cell, "overrides")) if cell.strip() else None
    if name in ("project", "request", "mode", "phase"):
        return (None, name, cell) if cell.strip() else None
    if "." in name:
        return ("overrides", name, _scalar(cell)) if cell.strip() else None
    return "labels", name, cell


def _job(where: str, fields: dict, base: str, request: str, overrides: Mapping[str, Any]) -> Job:
    project = fields.get("project")
    if not isinstance(project, str) or not project.strip():
        raise JobListError(f"{where}: no project; give the project folder's path")
    for key, choices in (("mode", MODES), ("phase", PHASES)):
        if fields.get(key) is not None and fields[key] not in choices:
            raise JobListError(f"{where}: {key} {quoted(str(fields[key]))} is not one of {', '.join(choices)}")
    for key, kind in (("request", str), ("overrides", dict), ("labels", dict), ("facts", list)):
        if fields.get(key) is not None and not isinstance(fields[key], kind):
            raise JobListError(f"{where}: {key} must be a {'JSON object' if kind is dict else kind.__name__}, "
                               f"not {type(fields[key]).__name__}")
    try:
        merged = build_overrides({**overrides, **(fields.get("overrides") or {})},
                                 mode=fields.get("mode"), phase=fields.get("phase"))
    except CtxEngineError as exc:
        raise JobListError(f"{where}: {exc}") from None
    return Job(project=os.path.join(base, os.path.expanduser(project.strip())),
               request=fields.get("request", request), overrides=merged,
               labels=dict(fields.get("labels") or {}), facts=tuple(str(f) for f in fields.get("facts") or ()))


def _label_choices(jobs: list[Job], entries: list[dict]) -> list[Job]:
    """When the list gives a mode or phase, each becomes a label of every row (empty where a
    line has none), so the rows of one project in two modes tell apart; every job gets the
    same label columns."""
    named = [key for key in ("mode", "phase") if any(key in fields for fields in entries)]
    keys = list(dict.fromkeys(key for job in jobs for key in job.labels))
    out = []
    for job, fields in zip(jobs, entries):
        labels = {**{key: fields.get(key, "") for key in named}, **{key: job.labels.get(key, "") for key in keys}}
        out.append(Job(job.project, job.request, job.overrides, job.nodes, labels, job.facts))
    return out


def _json_object(where: str, text: str, what: str, example: str = '{"budget.maxTokens": 32000}') -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobListError(f"{where}: {what} is not valid JSON ({exc.msg} at column {exc.colno}); "
                           f"write a JSON object, e.g. {example}") from None
    if not isinstance(value, dict):
        raise JobListError(f"{where}: {what} must be a JSON object, not {type(value).__name__}")
    return value


def _scalar(text: str) -> Any:
    """A CSV cell as a --set value (32000 -> int, true -> bool)."""
    return parse_override(f"x={text}")[1]


# ----------------------------------------------------------------------------- result files


def output_format(path: str | os.PathLike) -> str:
    """csv, jsonl or parquet, from the file name; a CtxEngineError for any other extension, or
    for .parquet when pyarrow (the extra ``parquet``) is not installed."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in OUTPUT_FORMATS:
        raise CtxEngineError(f"-o {quoted(os.fspath(path))}: unknown file type {quoted(suffix or '(none)')}; "
                             f"name it .csv, .jsonl or .parquet")
    if OUTPUT_FORMATS[suffix] == "parquet":
        parquet_module(path)
    return OUTPUT_FORMATS[suffix]


def parquet_module(path: str | os.PathLike, option: str = "-o"):
    """``pyarrow.parquet``, imported now (pyarrow is the optional extra ``parquet``); a
    CtxEngineError naming ``path`` when it is not installed."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CtxEngineError(f"{option} {quoted(os.fspath(path))}: .parquet files need pyarrow, which is not installed; "
                             'pip install "ctxengine[parquet]", or name the file .csv') from None
    return pq


def row_columns(jobs: Iterable[Job], contexts: bool = False) -> list[str]:
    """The columns of a batch's rows: :data:`ROW_COLUMNS`, the context file, then every label."""
    labels = dict.fromkeys(key for job in jobs for key in job.labels)
    return [*ROW_COLUMNS, *([CONTEXT_FILE_COLUMN] if contexts else []), *(k for k in labels if k not in ROW_COLUMNS)]


class RowWriter:
    """Writes rows to an open file in one format; ``write`` flushes (csv, jsonl) or buffers one
    parquet row group; ``close`` writes what is left (and the parquet footer)."""

    def __init__(self, fh: IO, fmt: str, columns: Sequence[str]):
        self.fh, self.fmt, self.columns = fh, fmt, list(columns)
        self.rows = self.failed = 0
        self._buffer: list[dict] = []
        self._parquet = None
        if fmt == "csv":
            self._csv = csv.DictWriter(fh, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n")
            self._csv.writeheader()
            fh.flush()

    def write(self, row: Mapping[str, Any], count: bool = True) -> None:
        if count:
            self.rows += 1
            self.failed += row.get("status") != "ok"
        if self.fmt == "csv":
            self._csv.writerow(row)
            self.fh.flush()
        elif self.fmt == "jsonl":
            self.fh.write(json.dumps({c: row.get(c) for c in self.columns}, ensure_ascii=False, default=str) + "\n")
            self.fh.flush()
        else:
            self._buffer.append({c: row.get(c) for c in self.columns})
            if len(self._buffer) >= PARQUET_ROW_GROUP:
                self._write_group()

    def close(self) -> None:
        if self.fmt == "parquet":
            if self._buffer or self._parquet is None:
                self._write_group()
            self._parquet.close()
        self.fh.flush()

    def _write_group(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._parquet is None:
            self._schema = _parquet_schema(self.columns, self._buffer)
            self._parquet = pq.ParquetWriter(self.fh, self._schema)
        self._parquet.write_table(pa.Table.from_pylist(self._buffer, schema=self._schema))
        self._buffer = []


_PARQUET_TYPES = {
    "tokens_before": "int64", "tokens_after": "int64", "utilisation": "float64", "truncated": "bool",
    "sections_kept": "int64", "sections_summarized": "int64", "sections_dropped": "int64", "time_s": "float64",
    "cache_hits": "int64", "facts_kept": "int64", "facts_total": "int64",
}


def _parquet_schema(columns: Sequence[str], rows: list[dict]):
    """Fixed types for the row columns; a label's type is read from the first rows (text when
    they are all empty)."""
    import pyarrow as pa

    fields = []
    for column in columns:
        if column in _PARQUET_TYPES:
            kind = pa.type_for_alias(_PARQUET_TYPES[column])
        elif column in ROW_COLUMNS or column == CONTEXT_FILE_COLUMN:
            kind = pa.string()
        else:
            kind = pa.array([row.get(column) for row in rows]).type
            kind = pa.string() if pa.types.is_null(kind) else kind
        fields.append(pa.field(column, kind))
    return pa.schema(fields)


@contextlib.contextmanager
def open_rows(output: str | os.PathLike, columns: Sequence[str]) -> Iterator[RowWriter]:
    """A :class:`RowWriter` over ``output`` (with :func:`ctxengine.viz.output.output_file`: a file
    atomically, a FIFO or device in place; Ctrl-C keeps the rows written)."""
    fmt = output_format(output)
    with output_file(output, "-o", binary=fmt == "parquet", keep_on_interrupt=True) as fh:
        writer = RowWriter(fh, fmt, columns)
        try:
            yield writer
        finally:
            writer.close()


def read_rows(path: str | os.PathLike) -> Iterator[dict]:
    """The rows of a result file written before, one at a time (CSV cells as text)."""
    fmt = output_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(os.fspath(path)).iter_batches(batch_size=PARQUET_ROW_GROUP):
            yield from batch.to_pylist()
        return
    with open(path, encoding="utf-8", newline="") as fh:
        if fmt == "csv":
            yield from csv.DictReader(fh)
            return
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    raise CtxEngineError(f"--resume: {quoted(os.fspath(path))}:{number} is not a JSON row; "
                                         "remove the line or run without --resume") from None


# ----------------------------------------------------------------------------- --resume


def resume_plan(jobs: Sequence[Job], output: str | os.PathLike) -> tuple[list[Job], set[tuple[str, str]]]:
    """(the jobs to build, the (project, fingerprint) keys of the old rows to keep).

    A job is skipped when ``output`` holds an ok row of its project with the fingerprint its
    inputs have now (:func:`ctxengine.batch.job_fingerprint`); failed rows are built again.
    """
    if not os.path.exists(output):
        return list(jobs), set()
    done = {(row.get("project"), row.get("fingerprint")) for row in read_rows(output) if row.get("status") == "ok"}
    todo, kept = [], set()
    for job in jobs:
        key = (os.path.abspath(os.fspath(job.project)), job_fingerprint(job))
        if key in done and key not in kept:
            kept.add(key)
        else:
            todo.append(job)
    return todo, kept


def kept_rows(output: str | os.PathLike, jobs: Sequence[Job], kept: set[tuple[str, str]]) -> Iterator[dict]:
    """The old rows --resume keeps: those of skipped jobs (once each) and every row of a project
    not in this batch; the rows of projects built again go."""
    if not os.path.exists(output):
        return
    projects = {os.path.abspath(os.fspath(job.project)) for job in jobs}
    seen: set = set()
    for row in read_rows(output):
        key = (row.get("project"), row.get("fingerprint"))
        if row.get("project") not in projects or (key in kept and key not in seen):
            seen.add(key)
            yield row

"""Batch over many projects: jobs, rows, executors (local, processes, dask), job lists, result
files, --resume and --contexts-dir. Real projects in tmp_path, real git, the real driver."""

from __future__ import annotations

import csv
import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DEMO, write_project

from ctxengine import cli
from ctxengine.batch import CONTEXT_FILE_COLUMN, ROW_COLUMNS, Job, job_fingerprint, run_jobs
from ctxengine.batch_io import JobListError, open_rows, read_job_list, read_rows

GSD = DEMO.parent / "gsd"
PLAN_FACT = "401"  # the demo's plan and request speak of a 401


@pytest.fixture
def broken(tmp_path) -> Path:
    return write_project(tmp_path / "broken", {".planning/config.json": "{not json"})


def _by_name(rows) -> dict:
    return {Path(row["project"]).name: row for row in rows}


# ----------------------------------------------------------------------------- rows


def test_rows_have_the_columns_labels_facts_and_errors(broken, tmp_path):
    jobs = [Job(str(DEMO), "Fix the login endpoint", labels={"arm": "a", "n": 1}, facts=(PLAN_FACT, "no such fact 9z")),
            Job(str(broken), "x", labels={"arm": "b", "n": 2}), Job(str(tmp_path / "missing"), "x")]
    rows = list(run_jobs(jobs))
    assert list(rows[0]) == [*ROW_COLUMNS, "arm", "n"]
    good, bad, missing = rows
    assert good["status"] == "ok" and good["error"] is None and (good["arm"], good["n"]) == ("a", 1)
    assert good["facts_kept"] == 1 and good["facts_total"] == 2
    assert good["tokens_after"] > 0 and 0 < good["utilisation"] < 1 and good["time_s"] > 0
    assert good["sections_kept"] > 0 and good["sections_dropped"] == 0 and good["truncated"] is False
    assert good["tokens_before"] == good["tokens_after"]  # nothing cut: one exact count, not an estimate beside it
    assert len(good["fingerprint"]) == 32 and good["position"] == ""
    assert bad["status"] == "error" and bad["error"].startswith("ConfigError: ") and "config.json:1:" in bad["error"]
    assert bad["arm"] == "b"
    assert missing["status"] == "error" and "does not exist" in missing["error"]


def test_a_truncated_build_counts_its_sections_and_gsd_gives_a_position():
    small, gsd = run_jobs([Job(str(DEMO), "Fix the login endpoint", overrides={"budget.maxTokens": 2000}), Job(str(GSD), "x")])
    assert small["truncated"] is True and small["tokens_before"] > small["tokens_after"]
    assert small["sections_summarized"] >= 1 and small["sections_dropped"] >= 1
    assert gsd["position"].startswith("v1.0 phase 2 plan 02-")


def test_progress_callable_sees_every_row_and_no_bar_without_a_terminal(capsys):
    seen = []
    rows = list(run_jobs([Job(str(DEMO), "x")] * 2, progress=seen.append))
    assert seen == rows
    list(run_jobs([Job(str(DEMO), "x")], progress=True))  # stderr is not a terminal here: quiet
    assert capsys.readouterr().err == ""


def test_contexts_go_to_safe_file_names(tmp_path):
    odd = tmp_path / "a b:c*?"
    odd.mkdir()
    out = tmp_path / "contexts"
    out.mkdir()
    rows = list(run_jobs([Job(str(DEMO), "one"), Job(str(DEMO), "two"), Job(str(odd), "x")], contexts_dir=out))
    names = [Path(row[CONTEXT_FILE_COLUMN]).name for row in rows]
    assert len(set(names)) == 3 and all(Path(row[CONTEXT_FILE_COLUMN]).parent == out for row in rows)
    assert names[2].startswith("a_b_c") and all(set(n) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for n in names)
    assert "one" in Path(rows[0][CONTEXT_FILE_COLUMN]).read_text() and "two" in Path(rows[1][CONTEXT_FILE_COLUMN]).read_text()


def test_the_fingerprint_follows_files_git_request_and_labels(tmp_path):
    project = write_project(tmp_path / "p", {".planning/plans/current/plan.md": "# Plan\n\n- step one\n"})
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    first = job_fingerprint(Job(str(project), "x"))
    assert job_fingerprint(Job(str(project), "x")) == first
    assert job_fingerprint(Job(str(project), "y")) != first
    assert job_fingerprint(Job(str(project), "x", labels={"arm": 1})) != first
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    committed = job_fingerprint(Job(str(project), "x"))
    assert committed != first
    plan = project / ".planning/plans/current/plan.md"
    plan.write_text("# Plan\n\n- step two\n")
    os.utime(plan, ns=(1, 1))
    assert job_fingerprint(Job(str(project), "x")) != committed


# ----------------------------------------------------------------------------- executors


def _summary(rows) -> list:
    return sorted((Path(r["project"]).name, r["status"], r["tokens_after"], r["fingerprint"]) for r in rows)


def test_processes_give_the_rows_of_local(broken):
    jobs = [Job(str(DEMO), "x"), Job(str(broken), "x"), Job(str(GSD), "y")]
    assert _summary(run_jobs(jobs, executor="processes", workers=2)) == _summary(run_jobs(jobs))


def test_processes_submit_in_bounded_chunks_and_stop_early():
    endless = (Job(str(DEMO), f"request {i}") for i in itertools.count())
    rows = run_jobs(endless, executor="processes", workers=2, chunksize=1)
    first = list(itertools.islice(rows, 3))  # an endless list: only a window of it is ever submitted
    rows.close()  # the pool stops with the generator
    assert [row["status"] for row in first] == ["ok"] * 3


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        yield cluster


def test_dask_joins_a_scheduler_and_gives_the_rows_of_local(dask_cluster, broken):
    jobs = [Job(str(DEMO), "x"), Job(str(broken), "x"), Job(str(GSD), "y")]
    rows = list(run_jobs(jobs, executor="dask", scheduler=dask_cluster.scheduler_address, workers=2))
    assert _summary(rows) == _summary(run_jobs(jobs))


def test_a_scheduler_that_is_not_there_is_a_clear_error(monkeypatch):
    import ctxengine.batch as batch
    from ctxengine.nodes.types import CtxEngineError

    pytest.importorskip("distributed")
    monkeypatch.setattr(batch, "SCHEDULER_TIMEOUT", 1)
    with pytest.raises(CtxEngineError, match="cannot connect"):
        list(run_jobs([Job(str(DEMO))], executor="dask", scheduler="tcp://127.0.0.1:9"))


# ----------------------------------------------------------------------------- job lists


def test_text_list_skips_comments_and_resolves_paths_from_its_folder(tmp_path):
    (tmp_path / "p1").mkdir()
    listing = tmp_path / "jobs.txt"
    listing.write_text(f"# projects\n\np1\n{DEMO}\n  # indented comment\n")
    jobs = read_job_list(listing, "req", {"budget.maxTokens": 9000})
    assert [j.project for j in jobs] == [str(tmp_path / "p1"), str(DEMO)]
    assert all(j.request == "req" and j.overrides == {"budget.maxTokens": 9000} and j.labels == {} for j in jobs)


def test_csv_list_gives_requests_modes_overrides_and_labels(tmp_path):
    listing = tmp_path / "jobs.csv"
    listing.write_text('project,request,mode,budget.maxTokens,team\n'
                       f'{DEMO},"Fix it, now",review,32000,core\n'
                       f'{DEMO},,,,\n')
    first, second = read_job_list(listing, "default request")
    assert first.request == "Fix it, now" and first.overrides == {"template": "review", "budget.maxTokens": 32000}
    assert first.labels == {"mode": "review", "team": "core"}
    assert second.request == "default request" and second.overrides == {} and second.labels == {"mode": "", "team": ""}


def test_jsonl_list_gives_overrides_labels_and_facts(tmp_path):
    listing = tmp_path / "jobs.jsonl"
    listing.write_text(json.dumps({"project": str(DEMO), "phase": "plan", "overrides": {"budget.maxTokens": 8000},
                                   "labels": {"arm": "x"}, "facts": ["401"]}) + "\n\n"
                       + json.dumps({"project": str(GSD), "request": "r"}) + "\n")
    first, second = read_job_list(listing)
    assert first.overrides == {"disclosure.phase": "plan", "budget.maxTokens": 8000} and first.facts == ("401",)
    assert first.labels == {"phase": "plan", "arm": "x"} and second.labels == {"phase": "", "arm": ""}
    assert second.request == "r"


@pytest.mark.parametrize("name, text, expected", [
    ("jobs.jsonl", '{"project": "a"}\n{"project": "b",}\n', "jobs.jsonl:2: the line is not valid JSON"),
    ("jobs.jsonl", '{"project": "a", "modes": "dev"}\n', "jobs.jsonl:1: unknown key 'modes'"),
    ("jobs.jsonl", '["a"]\n', "jobs.jsonl:1: the line must be a JSON object"),
    ("jobs.jsonl", '{"request": "x"}\n', "jobs.jsonl:1: no project"),
    ("jobs.jsonl", '{"project": "a", "overrides": [1]}\n', "jobs.jsonl:1: overrides must be a JSON object"),
    ("jobs.csv", "project,mode\na,dev\nb,fast\n", "jobs.csv:3: mode 'fast' is not one of dev, research, review"),
    ("jobs.csv", "path,mode\na,dev\n", "jobs.csv:1: a CSV job list needs a header line naming a 'project' column"),
    ("jobs.csv", "project,mode\na,dev,extra\n", "jobs.csv:2: 3 cells for 2 columns"),
    ("jobs.csv", 'project,overrides\na,{"x": \n', "jobs.csv:2: overrides is not valid JSON"),
    ("jobs.txt", "# only a comment\n", "no projects in it"),
])
def test_bad_list_lines_name_the_file_and_line(tmp_path, name, text, expected):
    listing = tmp_path / name
    listing.write_text(text)
    with pytest.raises(JobListError) as caught:
        read_job_list(listing)
    assert expected in str(caught.value) and str(listing) in str(caught.value)


# ----------------------------------------------------------------------------- result files


ROWS = [{"project": "/p/a", "status": "ok", "error": None, "tokens_after": 10, "utilisation": 0.5, "truncated": False,
         "arm": "x"},
        {"project": "/p/b", "status": "error", "error": "ConfigError: bad", "arm": "y"}]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_result_files_round_trip(tmp_path, suffix, monkeypatch):
    import ctxengine.batch_io as batch_io

    monkeypatch.setattr(batch_io, "PARQUET_ROW_GROUP", 1)  # several row groups
    out = tmp_path / f"rows{suffix}"
    with open_rows(out, [*ROW_COLUMNS, "arm"]) as writer:
        for row in ROWS:
            writer.write(row)
    assert (writer.rows, writer.failed) == (2, 1)
    back = list(read_rows(out))
    assert [r["project"] for r in back] == ["/p/a", "/p/b"] and [r["arm"] for r in back] == ["x", "y"]
    assert str(back[0]["tokens_after"]) == "10" and back[1]["error"] == "ConfigError: bad"
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        assert pq.ParquetFile(out).metadata.num_row_groups == 2
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_ctrl_c_keeps_the_rows_written(tmp_path, suffix):
    out = tmp_path / f"rows{suffix}"
    with pytest.raises(KeyboardInterrupt):
        with open_rows(out, [*ROW_COLUMNS, "arm"]) as writer:
            writer.write(ROWS[0])
            raise KeyboardInterrupt
    assert [r["project"] for r in read_rows(out)] == ["/p/a"]
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


# ----------------------------------------------------------------------------- the CLI (in process)


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["batch", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_resume_builds_only_what_changed(tmp_path, capsys):
    one = write_project(tmp_path / "one", {".planning/plans/current/plan.md": "# Plan\n\n- one\n"})
    two = write_project(tmp_path / "two", {".planning/plans/current/plan.md": "# Plan\n\n- two\n"})
    out = tmp_path / "rows.jsonl"
    code, _, err = _cli(capsys, str(one), str(two), "--request", "x", "-o", str(out))
    assert code == 0 and "2 projects built" in err
    first = {row["project"]: row for row in read_rows(out)}
    code, _, err = _cli(capsys, str(one), str(two), "--request", "x", "-o", str(out), "--resume")
    assert code == 0 and "0 projects built, 2 unchanged (kept)" in err
    assert {row["project"]: row for row in read_rows(out)} == first
    plan = two / ".planning/plans/current/plan.md"
    plan.write_text("# Plan\n\n- two, changed\n")
    os.utime(plan, ns=(1, 1))
    code, _, err = _cli(capsys, str(one), str(two), "--request", "x", "-o", str(out), "--resume")
    assert code == 0 and "1 projects built, 1 unchanged (kept)" in err
    rows = list(read_rows(out))
    assert sorted(Path(r["project"]).name for r in rows) == ["one", "two"]
    assert {r["project"]: r["fingerprint"] for r in rows}[str(two)] != first[str(two)]["fingerprint"]


@pytest.mark.parametrize("args, expected", [
    (["{demo}", "--resume"], "--resume reads the rows of -o FILE"),
    (["{demo}", "-o", "{tmp}/rows.txt"], "name it .csv, .jsonl or .parquet"),
    ([], "give PROJECT_DIR... or --from-file LIST"),
    (["{demo}", "--scheduler", "tcp://127.0.0.1:9"], "add --executor dask"),
    (["{demo}", "--contexts-dir", "{tmp}/nope"], "the folder does not exist"),
    (["--from-file", "{tmp}/jobs.jsonl"], "jobs.jsonl:1: unknown key 'path'"),
])
def test_cli_usage_errors_exit_2_with_one_line(tmp_path, capsys, args, expected):
    (tmp_path / "jobs.jsonl").write_text('{"path": "x"}\n')
    code, out, err = _cli(capsys, *(a.format(demo=DEMO, tmp=tmp_path) for a in args))
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1 and out == ""


def test_cli_from_csv_list_with_processes_contexts_and_jsonl(tmp_path, broken):
    """The CLI end to end in its own process: a CSV list, two worker processes, contexts, JSON lines."""
    listing = tmp_path / "jobs.csv"
    listing.write_text(f"project,request,mode\n{DEMO},Fix the login endpoint,review\nbroken,x,\n")
    contexts = tmp_path / "contexts"
    contexts.mkdir()
    out = tmp_path / "rows.jsonl"
    done = subprocess.run(["ctxengine", "batch", "--from-file", str(listing), "--executor", "processes", "--workers", "2",
                           "-o", str(out), "--contexts-dir", str(contexts)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == "ctxengine: 1 of 2 projects failed (the error column says why)"
    rows = _by_name(json.loads(line) for line in out.read_text().splitlines())
    assert rows["demo"]["status"] == "ok" and rows["demo"]["mode"] == "review"
    assert rows["broken"]["status"] == "error" and rows["broken"][CONTEXT_FILE_COLUMN] is None
    assert Path(rows["demo"][CONTEXT_FILE_COLUMN]).read_text().strip()
    header = list(json.loads(out.read_text().splitlines()[0]))
    assert header == [*ROW_COLUMNS, CONTEXT_FILE_COLUMN, "mode"]


def test_cli_csv_on_stdout_keeps_the_column_order(capsys):
    code, out, _ = _cli(capsys, str(DEMO), "--request", "x")
    assert code == 0
    reader = csv.DictReader(out.splitlines())
    assert reader.fieldnames == list(ROW_COLUMNS) and next(reader)["status"] == "ok"


# ----------------------------------------------------------------------------- progress and Ctrl-C


class _Terminal:
    """A stderr that says it is a terminal (tqdm draws its bar only there)."""

    def __init__(self):
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_a_terminal_gets_a_progress_bar(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    rows = list(run_jobs([Job(str(DEMO), "x")] * 2, progress=True))
    assert len(rows) == 2 and "2/2" in terminal.text and "project" in terminal.text


def test_ctrl_c_with_worker_processes_keeps_the_finished_rows(tmp_path):
    """A project whose reference URL stalls holds one worker; Ctrl-C once the demo's row is
    written: exit 130, the row is in the file, no temporary file left."""
    from test_cli_hardening import CLI, INTERRUPTED, _default_sigint, _env, _Stall, one_line

    from conftest import local_http_server

    _Stall.started.clear()
    _Stall.release.clear()
    out = tmp_path / "rows.csv"
    with local_http_server(_Stall) as url:
        slow = write_project(tmp_path / "slow", {".planning/config.json": {"references": {"project": [f"{url}/doc.md"]}}})
        sets = ["--set", "trust.allowPrivateUrls=true", "--set", "references.urlTimeout=60",
                "--set", "trust.urlConnectTimeout=60", "--set", "trust.buildDeadline=60"]
        proc = subprocess.Popen([*CLI, "batch", str(slow), str(DEMO), "--request", "x", *sets, "--executor", "processes",
                                 "--workers", "2", "-o", str(out)], env=_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
        try:
            assert _Stall.started.wait(90), "no worker fetched the stalled URL"
            for _ in range(600):  # until the demo's row is in the temporary file
                temps = list(tmp_path.glob(".rows.csv.*.tmp"))
                if temps and "demo" in temps[0].read_text():
                    break
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            _Stall.release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130 and one_line(stderr) == INTERRUPTED
    assert [Path(r["project"]).name for r in csv.DictReader(out.open())] == ["demo"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "slow"]


def test_cli_batch_keeps_a_cache_only_when_asked(tmp_path, capsys):
    """A batch builds each project once: no cache unless --cache or --cache-dir says so."""
    from ctxengine import driver

    project = write_project(tmp_path / "p", {".planning/plans/current/plan.md": "# Plan\n\n- one\n"})
    folder, out = tmp_path / "cache", tmp_path / "rows.jsonl"
    try:
        assert _cli(capsys, str(project), "--request", "x", "-o", str(out))[0] == 0
        assert [row["cache_hits"] for row in read_rows(out)] == [0] and driver.last_cache_run() is None
        for _ in range(2):  # the second run is served from the cache the first one wrote
            assert _cli(capsys, str(project), "--request", "x", "-o", str(out), "--cache-dir", str(folder))[0] == 0
        assert folder.is_dir() and [row["cache_hits"] > 0 for row in read_rows(out)] == [True]
    finally:
        driver.set_cache_defaults()  # the process default of the API (cached) for the tests after this one

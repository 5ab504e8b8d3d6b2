"""Experiments: every combination of settings and node swaps on every project, as rows, a
summary by variant, a results file and a chart (real builds through run_jobs)."""

from __future__ import annotations

import pandas as pd
import pytest

import ctxengine
from ctxengine import experiment as ex
from ctxengine.batch import ROW_COLUMNS, Job, run_jobs
from ctxengine.nodes.types import CtxEngineError
from conftest import DEMO
from test_swaps import FIRST_LINES, write

GSD = DEMO.parent / "gsd"
TIGHT = {"state.includeGit": False, "state.includeEnvironment": False, "budget.maxTokens": 1600,
         "budget.reserveTokens": 400}
REQUEST = "Fix the login endpoint"


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    """Two projects x (2 summarizers x built-in or my summarizer): 8 rows, facts counted."""
    mine = write(tmp_path_factory.mktemp("nodes"), "my_nodes.py", FIRST_LINES)
    return ctxengine.experiment([DEMO, GSD], vary={"truncation.summarizer": ["extractive", "headings"],
                                                   "nodes": ["none", mine]},
                                request=REQUEST, overrides=TIGHT, facts=["FIRST-LINES", "# User Request", "no-such-fact"])


def test_one_row_per_project_and_variant(frame):
    assert len(frame) == 8 and (frame["status"] == "ok").all(), frame["error"].tolist()
    assert list(frame.columns[:len(ROW_COLUMNS)]) == list(ROW_COLUMNS)
    assert list(frame.columns[len(ROW_COLUMNS):]) == ["variant", "truncation.summarizer", "nodes"]
    assert list(frame["variant"].unique()) == ["summarizer=extractive nodes=none", "summarizer=extractive nodes=my_nodes",
                                              "summarizer=headings nodes=none", "summarizer=headings nodes=my_nodes"]
    assert (frame["tokens_after"] <= frame["tokens_before"]).all() and (frame["utilisation"] <= 1).all()
    sections = frame["sections_kept"] + frame["sections_summarized"] + frame["sections_dropped"]
    assert (sections >= 5).all() and (frame["sections_summarized"] + frame["sections_dropped"] > 0).all()
    assert (frame.loc[frame["project"].str.endswith("gsd"), "position"] == "v1.0 phase 2 plan 02-02").all()


def test_facts_show_which_variant_swapped_the_summarizer(frame):
    assert (frame["facts_total"] == 3).all()
    swapped = frame["nodes"] == "my_nodes"
    demo = frame["project"] == str(DEMO)
    assert (frame.loc[swapped & demo, "facts_kept"] == 2).all()  # my summary's mark and the request
    assert (frame.loc[~swapped, "facts_kept"] == 1).all()  # the request only: no summary says FIRST-LINES


def test_the_summary_has_one_row_per_variant(frame):
    table = ex.experiment_summary(frame)
    assert list(table.index) == list(frame["variant"].unique())
    assert (table["projects"] == 2).all() and (table["failed"] == 0).all()
    extractive = frame[frame["variant"] == "summarizer=extractive nodes=none"]
    assert table.loc["summarizer=extractive nodes=none", "tokens_after"] == pytest.approx(extractive["tokens_after"].mean())
    assert table["facts_kept_pct"].max() > table["facts_kept_pct"].min()
    text = ex.format_summary(table)
    assert "summarizer=headings nodes=my_nodes" in text and "%" in text


def test_results_are_written_as_csv_or_parquet_and_the_chart_as_png(frame, tmp_path):
    ex.write_results(frame, tmp_path / "r.csv")
    ex.write_results(frame, tmp_path / "r.parquet")
    assert pd.read_csv(tmp_path / "r.csv")["tokens_after"].tolist() == frame["tokens_after"].tolist()
    assert pd.read_parquet(tmp_path / "r.parquet")["variant"].tolist() == frame["variant"].tolist()
    with pytest.raises(CtxEngineError, match=r"\.csv or \.parquet"):
        ex.write_results(frame, tmp_path / "r.xlsx")
    chart = ex.draw_chart(frame, tmp_path / "chart.png")
    import matplotlib.image

    pixels = matplotlib.image.imread(chart)
    assert pixels.shape[0] > 500 and pixels.shape[1] > 800
    assert len({tuple(p) for p in pixels[::20, ::20].reshape(-1, pixels.shape[2])}) > 5  # bars, not a blank page


def test_combinations_and_their_errors():
    with pytest.raises(CtxEngineError, match=r"'truncation.sumarizer': not a configuration key; closest: truncation.summarizer"):
        ex.combinations({"truncation.sumarizer": ["headings"]})
    with pytest.raises(CtxEngineError, match="needs a list of values"):
        ex.combinations({"truncation.summarizer": "headings"})
    with pytest.raises(CtxEngineError, match="nothing to vary"):
        ex.combinations({})
    combos = ex.combinations({"budget.maxTokens": [4000, 8000], "nodes": ["none", "mine.py"]})
    assert combos == [{"budget.maxTokens": 4000, "nodes": "none"}, {"budget.maxTokens": 4000, "nodes": "mine.py"},
                      {"budget.maxTokens": 8000, "nodes": "none"}, {"budget.maxTokens": 8000, "nodes": "mine.py"}]


def test_vary_values_read_like_set_values():
    assert ex.parse_vary("budget.maxTokens=4000, 8000") == ("budget.maxTokens", [4000, 8000])
    assert ex.parse_vary("truncation.compact=true,false") == ("truncation.compact", [True, False])
    with pytest.raises(CtxEngineError, match="write it as dotted.key=a,b"):
        ex.parse_vary("truncation.summarizer")


def test_facts_files(tmp_path):
    (tmp_path / "facts.txt").write_text("# what must survive\nJWT-401\n\n  bcrypt cost 12  \n", encoding="utf-8")
    assert ex.read_facts(tmp_path / "facts.txt") == ("JWT-401", "bcrypt cost 12")
    (tmp_path / "empty.txt").write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(CtxEngineError, match="no facts in it"):
        ex.read_facts(tmp_path / "empty.txt")
    with pytest.raises(CtxEngineError, match="missing.txt"):
        ex.read_facts(tmp_path / "missing.txt")


def test_a_failed_run_is_a_row_and_the_jobs_keep_their_labels(tmp_path):
    jobs = [Job(str(tmp_path / "nowhere"), labels={"variant": "v"}),
            Job(str(DEMO), REQUEST, {"truncation.summarizer": "bogus"}, labels={"variant": "v"}),
            Job(str(DEMO), REQUEST, TIGHT, labels={"variant": "w", "extra": 1}, facts=("# User Request",))]
    seen = []
    rows = list(run_jobs(jobs, progress=seen.append))
    assert seen == rows and [r["status"] for r in rows] == ["error", "error", "ok"]
    assert "does not exist" in rows[0]["error"] and "truncation.summarizer" in rows[1]["error"]
    assert rows[2]["extra"] == 1 and rows[2]["facts_kept"] == 1 and rows[2]["time_s"] > 0
    table = ex.experiment_summary(pd.DataFrame(rows))
    assert table.loc["v", "failed"] == 2 and table.loc["w", "failed"] == 0
    with pytest.raises(CtxEngineError, match="executor 'ray'"):
        list(run_jobs(jobs, executor="ray"))


def test_the_experiment_command(tmp_path, capsys):
    from ctxengine.cli import main  # in process: the parser and the handler, without a second interpreter

    mine = write(tmp_path, "my_nodes.py", FIRST_LINES)
    (tmp_path / "facts.txt").write_text("FIRST-LINES\n", encoding="utf-8")
    code = main(["experiment", str(DEMO), "--vary", "truncation.strategy=auto,tail", "--module", mine,
                 "--set", "budget.maxTokens=1600", "--set", "budget.reserveTokens=400", "--request", REQUEST,
                 "--facts", str(tmp_path / "facts.txt"), "-o", str(tmp_path / "r.csv"), "--chart", str(tmp_path / "c.png")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "strategy=auto" in out and "strategy=tail" in out and "facts_kept_pct" in out
    rows = pd.read_csv(tmp_path / "r.csv")
    assert rows["facts_kept"].tolist() == [1, 0]  # auto summarizes the references (with mine); tail only cuts
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code = main(["experiment", str(DEMO), "--vary", "budget.maxTokns=1,2", "-o", str(tmp_path / "x.csv")])
    assert code == 2 and "closest: budget.maxTokens" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()

"""A core install (no extras): pyarrow is optional, builds never load it, parquet output says what to install."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import DEMO

#: Run in a fresh process where ``import pyarrow`` fails, as when the ``parquet`` extra is not
#: installed (a None in sys.modules is Python's documented way to make an import fail).
_CORE_INSTALL = r"""
import contextlib, io, json, sys
sys.modules["pyarrow"] = None
from ctxengine import cli

out = {}
for name, argv in ARGVS.items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        out[name] = (cli.main(argv), err.getvalue())
out["pyarrow"] = sorted(m for m, v in sys.modules.items() if m.startswith("pyarrow") and v is not None)
print(json.dumps(out))
"""


def test_without_pyarrow_builds_work_and_parquet_output_is_a_clear_error_before_any_run(tmp_path):
    argvs = {
        "batch": ["batch", str(DEMO), "-o", str(tmp_path / "rows.parquet")],
        "experiment": ["experiment", str(DEMO), "--vary", "truncation.strategy=tail,head",
                       "-o", str(tmp_path / "results.parquet")],
        "csv": ["batch", str(DEMO), "-o", str(tmp_path / "rows.csv")],
    }
    done = subprocess.run([sys.executable, "-c", _CORE_INSTALL.replace("ARGVS", repr(argvs))],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["pyarrow"] == []  # pandas (and the build) ran without it
    for name, file in (("batch", "rows.parquet"), ("experiment", "results.parquet")):
        code, err = out[name]
        assert code == 2, err
        assert str(tmp_path / file) in err and 'pip install "ctxengine[parquet]"' in err, err
        assert not (tmp_path / file).exists()
    assert out["csv"][0] == 0, out["csv"][1]  # a build with pyarrow blocked
    header, row = (tmp_path / "rows.csv").read_text().splitlines()
    assert header.startswith("project,status,") and ",ok," in row

"""Program outputs kept between processes (nodes/lib/usercache.py): by binary, never for scripts."""

from __future__ import annotations

import os
import shutil
import sys

from ctxengine.nodes.lib import usercache


def _new_process(monkeypatch) -> None:
    monkeypatch.setattr(usercache, "_OUTPUTS", None)


def test_a_binary_s_output_is_kept_and_follows_the_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "cache"))
    _new_process(monkeypatch)
    binary = shutil.copy(os.path.realpath(sys.executable), tmp_path / "prog")  # an ELF executable
    runs = []

    def run():
        runs.append(1)
        return f"prog {len(runs)}"

    assert usercache.program_output(str(binary), ("--version",), run) == "prog 1"
    _new_process(monkeypatch)
    assert usercache.program_output(str(binary), ("--version",), run) == "prog 1" and len(runs) == 1
    with open(binary, "ab") as fh:  # another binary at the same path (an upgrade): asked again
        fh.write(b"\0")
    _new_process(monkeypatch)
    assert usercache.program_output(str(binary), ("--version",), run) == "prog 2"


def test_a_script_always_runs_and_a_shared_file_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "cache"))
    _new_process(monkeypatch)
    script = tmp_path / "shim"
    script.write_text("#!/bin/sh\necho shim\n")
    runs = []
    for _ in range(2):
        _new_process(monkeypatch)
        usercache.program_output(str(script), ("--version",), lambda: runs.append(1) or "shim")
    assert len(runs) == 2  # a version manager's shim may answer by folder: never kept
    binary = os.path.realpath(sys.executable)
    usercache.program_output(binary, ("--x",), lambda: "mine")
    kept = tmp_path / "cache" / "programs.json"
    kept.chmod(0o666)  # writable by others: not trusted
    _new_process(monkeypatch)
    assert usercache.program_output(binary, ("--x",), lambda: "asked again") == "asked again"

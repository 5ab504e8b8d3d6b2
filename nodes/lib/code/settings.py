"""``code.*`` as the code stage reads it, and which of its parts run for the work at hand."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import FrozenMap, key


@dataclass(frozen=True)
class CodeSettings:
    """``code.*``: the switch, the pool's share, the parts per phase or mode, the caps, and the
    priorities of the named files (``priorities.code``) and the map (``priorities.codemap``)."""

    enabled: bool = key("code.enabled")
    share: float = key("code.share")
    map_min_share: float = key("code.mapMinShare")  # the map's floor of the pool when it runs
    files: FrozenMap = key("code.files")  # phase or mode -> named files on
    map: FrozenMap = key("code.map")  # phase or mode -> repo map on
    max_file_bytes: int = key("code.maxFileBytes")
    max_files: int = key("code.maxFiles")
    files_priority: int = key("priorities.code")
    map_priority: int = key("priorities.codemap")


@dataclass(frozen=True)
class CodeParts:
    """Which parts of the code stage run, and why: ``work`` is the phase (disclosure) or, with
    none, the mode template whose ``code.files`` / ``code.map`` entries decided."""

    files: bool = False
    map: bool = False
    work: str = ""
    reason: str = ""

    @property
    def any(self) -> bool:
        return self.files or self.map


def code_parts_for(settings: CodeSettings, phase: str | None, mode: str) -> CodeParts:
    """The parts that run for ``phase`` (a GSD phase type, or None) in mode template ``mode``:
    nothing when ``code.enabled`` is false; else the ``code.files`` and ``code.map`` entries of
    the phase, or of the mode when there is no phase (a name neither lists: off)."""
    if not settings.enabled:
        return CodeParts(reason="code.enabled is false")
    work = phase or mode
    files, repo_map = bool(settings.files.get(work, False)), bool(settings.map.get(work, False))
    reason = f"code.files.{work} is {str(files).lower()}, code.map.{work} is {str(repo_map).lower()}"
    return CodeParts(files, repo_map, work, reason)

"""Shared pieces of the GSD readers: the patterns, phase numbers, line and heading helpers."""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..fences import fenced
from ..markdown import frontmatter_block
from ..regex import lazy_regex

_HEADING = lazy_regex(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FIELD = lazy_regex(r"^[-*]?\s*\*{0,2}([A-Z][A-Za-z /_-]{1,30}?)\*{0,2}\s*:\s*\*{0,2}\s*(.*)$")
_FOCUS = lazy_regex(r"^\*\*Current focus:?\*\*:?\s*(.+)$", re.I)
_VERSION = lazy_regex(r"(?<![\w.])v\d+(?:\.\d+)*(?:-(?:alpha|beta|rc|pre)\w*)?(?![\w])", re.I)
_NUMBER = lazy_regex(r"\d+(?:\.\d+)*")
_OF = lazy_regex(r"(\d+(?:\.\d+)*)\s*(?:of|/)\s*(\d+(?:\.\d+)*)")
_PHASE_DIR = lazy_regex(r"^(?:phase[-_]?)?(\d+(?:\.\d+)*)([A-Za-z])?(?:-|$)", re.I)  # "2A-backend": part A of phase 2
_PLAN_FILE = lazy_regex(r"^(\d+(?:\.\d+)*[A-Za-z]?)-(\d+)-(PLAN|SUMMARY)\.md$")
_RANGE = lazy_regex(r"Phases?\s+(\d+(?:\.\d+)?)\s*(?:-|–|—|to)\s*(\d+(?:\.\d+)?)", re.I)
_PHASE_HEADING = lazy_regex(r"^Phase\s+(\d+(?:\.\d+)*)\b", re.I)
_PHASE_ITEM = lazy_regex(r"^\s*[-*]\s+\[[ xX]\]\s+\**Phase\s+(\d+(?:\.\d+)*)\b", re.I)
_DETAILS_OPEN = lazy_regex(r"^\s*<details\b", re.I)
_DETAILS_CLOSE = lazy_regex(r"^\s*</details>", re.I)
_SUMMARY_TAG = lazy_regex(r"<summary>(.*?)</summary>", re.I | re.S)
_TAG = lazy_regex(r"<[^>]+>")
_TASK_NAME = lazy_regex(r"<name>(.*?)</name>", re.S)
_TASK_FILES = lazy_regex(r"<files>(.*?)</files>", re.S)
_TASK_HEADING = lazy_regex(r"^#{2,4}\s+(Task\s+\d+\b.*)$")
_OBJECTIVE = lazy_regex(r"<objective>\s*(.*?)\s*</objective>", re.S)
_BOLD_LINE = lazy_regex(r"^\*\*(.+?)\*\*\s*$")
_SUMMARY_TITLE = lazy_regex(r"^(?:Phase\s+[\w.]+\s+Plan\s+[\w.]+\s*(?:Summary)?\s*[:\-—]\s*)", re.I)


def phase_key(text: str | None) -> tuple[int, ...] | None:
    """``"08.1"`` and ``"8.1"`` -> (8, 1); None when the text holds no number."""
    if not text:
        return None
    match = _NUMBER.search(text)
    if not match:
        return None
    return tuple(int(part) for part in match.group(0).split("."))


def is_phase_file(name: str) -> bool:
    """True for a phase folder's ``NN-MM-PLAN.md`` or ``NN-MM-SUMMARY.md`` (decimal NN too)."""
    return _PLAN_FILE.match(name) is not None


def dir_phase_key(name: str) -> tuple[int, ...] | None:
    """The phase number of a phase folder name (``02.1-critical-math-fixes`` -> (2, 1); the
    ``phase-23`` and ``phase-23-telemetry`` some projects write -> (23,); a lettered part of a
    phase, ``2A-backend``, -> (2,): see :func:`dir_phase_part`)."""
    match = _PHASE_DIR.match(name)
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def _lines_of(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _sections(lines: Sequence[str], start: int = 0) -> list[tuple[int, str, int, int]]:
    """(level, title, first index, last index) of each heading's section (outside fences)."""
    heads: list[tuple[int, str, int]] = []
    code = fenced(lines[start:])
    for i in range(start, len(lines)):
        line = lines[i]
        if not code[i - start]:
            match = _HEADING.match(line)
            if match:
                heads.append((len(match.group(1)), match.group(2).strip(), i))
    out = []
    for n, (level, title, i) in enumerate(heads):
        end = len(lines) - 1
        for level2, _, j in heads[n + 1 :]:
            if level2 <= level:
                end = j - 1
                break
        while end > i and not lines[end].strip():
            end -= 1
        out.append((level, title, i, end))
    return out


def _split_fm(text: str) -> tuple[str, str, int]:
    """(frontmatter text, body, body's first line) without parsing the YAML: PLAN and SUMMARY
    frontmatter is long (must_haves, key-files) and only a few top-level keys are read."""
    raw, body, start = frontmatter_block(text)
    return raw or "", body, start


def _fm_value(frontmatter: str, key: str) -> str | None:
    """A top-level key of YAML frontmatter as text: a scalar, a flow list, or a block list joined."""
    match = re.search(rf"^{re.escape(key)}:[ \t]*(.*)$", frontmatter, re.M)
    if not match:
        return None
    value = match.group(1).strip()
    if value and value[0] in "\"'" and value[-1] == value[0] and len(value) > 1:
        return value[1:-1]
    if value:
        return value
    items = []
    for line in frontmatter[match.end():].split("\n")[1:]:
        item = re.match(r"^[ \t]+-[ \t]+(.*)$", line)
        if not item:
            if line.strip() and not line.startswith((" ", "\t")):
                break
            continue
        items.append(item.group(1).strip().strip("\"'"))
    return "[" + ", ".join(items) + "]" if items else None


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_flat(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    return str(value)


def dir_phase_parts(name: str) -> tuple[str, str]:
    """A phase folder name's number as written (with its part letter) and the name after it
    (``08.1-game-theory`` -> ("08.1", "game-theory"); ``phase-23`` -> ("23", ""); ``2A-backend``
    -> ("2A", "backend"))."""
    match = _PHASE_DIR.match(name)
    if not match:
        return "", name
    return match.group(1) + (match.group(2) or ""), name[match.end():]


def dir_phase_part(name: str) -> str:
    """The part letter of a lettered phase folder, upper case (``2B-plugin`` -> "B"), else ""."""
    match = _PHASE_DIR.match(name)
    return (match.group(2) or "").upper() if match else ""

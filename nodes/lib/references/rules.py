"""Which rules a build loads beyond ``references.core`` as written: the project's own agent
instructions (``references.projectRules``: CLAUDE.md, AGENTS.md ...) and whether the bundled
``builtin:gsd-rules`` stays (``references.gsdRules``)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ...types import ConfigError
from ..quote import quoted
from .specs import ReferenceSpec
from .targets import is_drive_path

#: The bundled GSD rules; ``references.gsdRules`` decides whether they load (auto: for GSD layouts).
GSD_RULES = "builtin:gsd-rules"
PROJECT_RULES_KEY = "references.projectRules"


@dataclass(frozen=True)
class RuleFile:
    """One candidate of ``references.projectRules`` and what became of it."""

    name: str  # project-relative, as configured
    index: int  # its entry in references.projectRules
    status: str  # found | missing | empty | same | directory
    path: str | None = None  # absolute, when found
    why: str = ""


@dataclass(frozen=True)
class RulesChoice:
    """Which rules a build loads beyond ``references.core`` as written, and why: the project's
    own agent instructions (``references.projectRules``) and whether ``builtin:gsd-rules``
    stays (``references.gsdRules``)."""

    files: tuple[RuleFile, ...] = ()
    gsd_rules: bool = True
    gsd_why: str = ""

    def found(self) -> tuple[RuleFile, ...]:
        return tuple(f for f in self.files if f.status == "found")

    def explanation(self) -> list[tuple[str, str, str]]:
        """(what, found or not, why) per project rules candidate and for the GSD rules: the rows
        ``config --explain`` adds under the configuration (a found file is read under the trust
        rules by the build, whose warnings say when they refuse it)."""
        rows = [(f"rules: {f.name}", "found" if f.status == "found" else f"skipped ({f.status})", f.why)
                for f in self.files]
        rows.append((f"rules: {GSD_RULES}", "loads" if self.gsd_rules else "skipped", self.gsd_why))
        return rows


def rule_names(entries: Sequence[Any]) -> list[tuple[int, tuple[str, ...]]]:
    """(index, alternatives) of each ``references.projectRules`` entry: a project-relative file
    name, or names joined by ``|`` of which the first present and not empty is read (Codex reads
    AGENTS.override.md instead of AGENTS.md). Absolute paths and ``..`` are a ConfigError."""
    out = []
    for index, entry in enumerate(entries):
        names = tuple(part.strip() for part in str(entry).split("|") if part.strip())
        for name in names:
            parts = name.replace("\\", "/").split("/")
            if posixpath.isabs(name) or is_drive_path(name) or ".." in parts or name.startswith("~"):
                raise ConfigError(
                    f"key '{PROJECT_RULES_KEY}[{index}]' is {quoted(entry)}; name files inside the project, "
                    "relative to its root (like CLAUDE.md or .claude/CLAUDE.md)")
        if names:
            out.append((index, names))
    return out


def is_gsd_rules(entry: str) -> bool:
    """Whether a ``references.core`` entry names the bundled GSD rules."""
    entry = entry.strip()
    return entry.startswith("builtin:") and entry.removesuffix(".md") == GSD_RULES


def with_rules(specs: Sequence[ReferenceSpec], choice: RulesChoice) -> list[ReferenceSpec]:
    """The configured specs with the project's rules files first (core group, in the order of
    ``references.projectRules``) and ``builtin:gsd-rules`` left out when ``choice`` says so."""
    found = [ReferenceSpec("core", f.path or f.name, f.index, 0, PROJECT_RULES_KEY, f.name, True, f.why)
             for f in choice.found()]
    kept = [spec for spec in specs if choice.gsd_rules or not (spec.group == "core" and is_gsd_rules(spec.target))]
    return [replace(spec, order=order) for order, spec in enumerate(found + kept)]

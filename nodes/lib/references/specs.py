"""The configured references (``references.core``, ``.project``, ``.session``): their specs,
validated, and each group's default priority."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...types import ConfigError
from ..quote import quoted

GROUPS = ("core", "project", "session")
#: Which entry of ``context_config["priorities"]`` gives each group its default priority.
GROUP_PRIORITY_KEYS = {"core": "rules", "project": "reference", "session": "session_reference"}


@dataclass(frozen=True)
class ReferenceSpec:
    """One configured reference: its group, the text as written, and its place in the config."""

    group: str  # core | project | session
    target: str
    index: int  # position inside its group's list
    order: int  # position over all groups (core, then project, then session)
    setting: str = ""  # the configuration list it comes from, when not references.<group>
    shown: str = ""  # how messages name it, when not as written (an absolute path found for the project)
    optional: bool = False  # found, not named: a document that cannot be read is a warning, never an error
    why: str = ""  # why it loads (the disclosure plan's rule), when not "references.<group>"

    @property
    def where(self) -> str:
        return f"{self.setting or 'references.' + self.group}[{self.index}]"

    @property
    def label(self) -> str:
        """Where it is configured and what it names, as warnings and errors start."""
        return f"{self.where} {quoted(self.shown or self.target)}"


def reference_specs_from(references: Mapping[str, Any]) -> list[ReferenceSpec]:
    """The configured entries of core, project and session, in that order, validated."""
    specs: list[ReferenceSpec] = []
    for group in GROUPS:
        entries = references.get(group) or []
        if not isinstance(entries, (list, tuple)):
            raise ConfigError(f"key 'references.{group}' must be a list of paths, URLs or builtin:NAME")
        for index, entry in enumerate(entries):
            if not isinstance(entry, str) or not entry.strip():
                raise ConfigError(
                    f"key 'references.{group}[{index}]' is {quoted(entry)}; write a path relative to .planning/, "
                    "an absolute path, an http(s) URL or builtin:NAME"
                )
            specs.append(ReferenceSpec(group, entry.strip(), index, len(specs)))
    return specs


def group_priorities(priorities: Mapping[str, Any]) -> dict[str, int]:
    """Default priority of each configured group, from ``context_config["priorities"]``."""
    return {
        group: int(priorities[key])
        for group, key in GROUP_PRIORITY_KEYS.items()
    }

"""ONE reading of the GSD position (milestone, phase, phase folder, next plan), for the state
and the disclosure stages alike (DESIGN.md, "Where GSD stands in a project").

Rules: a pinned phase (``state.gsdPhase``) wins; else STATE.md's frontmatter over its body
prose; the files are evidence: a PLAN with a SUMMARY is done, a phase whose plans are all done
is complete (so is one STATE.md says is complete and ROADMAP.md checks off: its SUMMARYs were not
committed), and when STATE's phase is complete and a LATER phase folder has CONTEXT, RESEARCH
or PLAN files, the later phase is current. When STATE.md names no phase and says the milestone
is over, the project is between milestones: no phase is current (the last finished one is kept as
evidence), the next step is the next milestone; a milestone STATE.md calls "not started" is not
complete. A phase split in lettered folders (2A-, 2B-) is one phase. A milestone no frontmatter,
``Milestone:`` line or roadmap block names is taken from ROADMAP.md's ``**Milestone:**`` line or the
one version the prose calls a milestone. Where the sources disagree a warning names both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from ..quote import quoted
from ...types import ConfigError
from ..regex import lazy_regex
from .common import _PHASE_HEADING, _PHASE_ITEM, _PLAN_FILE, _RANGE, _TAG, dir_phase_key, dir_phase_part, dir_phase_parts, phase_key
from .common import _lines_of
from .roadmap import _TICKED, RoadmapPlans, milestone_blocks, milestone_phases, milestone_tokens, narrow_roadmap, phase_names, roadmap_plans
from .state import GsdState, parse_state

PINNED, FRONTMATTER, BODY, FILES, NONE = "pinned", "frontmatter", "body", "files", "none"
_PIN = lazy_regex(r"^\d+(?:\.\d+)*$")
_ARCHIVED = lazy_regex(r"(?:^|/)milestones/[^/]+-phases/")
_BETWEEN = lazy_regex(r"\bnone\b|between milestones|no active phase", re.I)
_EXECUTING = lazy_regex(r"execut|in[ _-]?progress|verif|implement", re.I)
_NOT_STARTED = lazy_regex(r"\bnot (?:yet )?started\b", re.I)
_UNVERIFIED = lazy_regex(r"(?:ready for|awaiting|needs?|pending)\s+verif|verification pending|\bunverified\b|not (?:yet )?verified",
                         re.I)


@dataclass(frozen=True)
class PhaseFolder:
    """One phase folder (relative to .planning/) and what its file names say."""

    path: str  # "phases/08.1-game-theory-hardening"
    key: tuple[int, ...]
    plans: tuple[str, ...] = ()  # plan ids with a PLAN or a SUMMARY file, by plan number: "08.1-01"
    done: tuple[str, ...] = ()  # plan ids with a SUMMARY
    context: tuple[str, ...] = ()  # *CONTEXT.md / *RESEARCH.md file names
    archived: bool = False  # under milestones/*-phases/
    named: tuple[str, ...] = ()  # plan ids ROADMAP.md or STATE.md name that have no file here
    named_by: tuple[str, ...] = ()  # the lines that name them ("ROADMAP.md:95 '- [ ] 15-02-PLAN.md'")
    parts: tuple[str, ...] = ()  # a phase split in lettered folders (2A-, 2B-, 2C-): every part's path, path first

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def words(self) -> frozenset[str]:
        """The words of the folder's name after its number ("02-database-stability" -> database, stability)."""
        return name_words(dir_phase_parts(self.name)[1])

    @property
    def all_plans(self) -> tuple[str, ...]:
        """The plans with a file and the plans named elsewhere, by plan number."""
        return tuple(sorted({*self.plans, *self.named}, key=_plan_order))

    @property
    def complete(self) -> bool:
        """Every plan (with a file, or named by the roadmap or STATE.md) has a SUMMARY, and there is one."""
        return bool(self.plans) and all(p in self.done for p in self.all_plans)

    @property
    def started(self) -> bool:
        """It holds CONTEXT, RESEARCH or PLAN files."""
        return bool(self.plans or self.context)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(p for p in self.all_plans if p not in self.done)

    def plan_id(self, number: int) -> str:
        """The id of plan ``number`` in this folder ("15-02"), spelled as the folder's number is."""
        return f"{dir_phase_parts(self.name)[0]}-{number:02d}"

    def with_named(self, numbers: Sequence[int], by: str = "", done: bool = False) -> "PhaseFolder":
        """This folder with the plans ``numbers`` that have no file here added as named ones
        (``by``: the line that names them; ``done``: it says they are done, a checked box)."""
        have = {_plan_number(p) for p in (*self.plans, *self.named)}
        extra = tuple(self.plan_id(n) for n in sorted(set(numbers)) if n not in have)
        if not extra:
            return self
        return replace(self, named=self.named + extra, named_by=self.named_by + ((by,) if by else ()),
                       done=self.done + extra if done else self.done)

    def with_total(self, total: int, by: str = "") -> "PhaseFolder":
        """This folder with plans named after its last one until it holds ``total`` (a count
        of "1/2 plans executed" or "Plan: 2 of 2"; plans may be numbered from 00)."""
        known = sorted({_plan_number(p) for p in (*self.plans, *self.named)})
        if not known or total <= len(known) or total > 99:
            return self
        return self.with_named(range(known[-1] + 1, known[-1] + 1 + total - len(known)), by)


_STOP = frozenset("a an and the of to for in on with by p0 p1 p2 p3 phase plans plan".split())


def name_words(text: str) -> frozenset[str]:
    """The words that name a phase, lower case, without small words and numbers
    ("Database Stability & Recovery (4/4 plans)" -> database, stability, recovery)."""
    return frozenset(w for w in re.findall(r"[a-z][a-z0-9]*", text.lower()) if w not in _STOP)


def same_name(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two phase names are one: they share two words (or every word of the shorter, when it has one)."""
    common = len(a & b)
    return common > 0 and common >= min(2, len(a), len(b))


def _leftover(folder: PhaseFolder, names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]]) -> str | None:
    """Why ``folder`` is left over from an earlier milestone, or None: ROADMAP.md gives its name to
    another phase number ("| 15. Database Stability |" for phases/02-database-stability/) and never
    to its own (the milestone was renumbered; the folder stayed behind)."""
    if not folder.words or any(same_name(folder.words, name_words(n)) for _, n in names.get(folder.key, ())):
        return None
    for key, named in sorted(names.items()):
        for line, name in named:
            if key != folder.key and same_name(folder.words, name_words(name)):
                return (f"{folder.path}/ is left over from an earlier milestone: ROADMAP.md:{line} names it phase "
                        f"{_show(key)} ('{_cut(name, 40)}')")
    return None


def _named_folder(key: tuple[int, ...], text: str, folders: Sequence[PhaseFolder],
                  names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]]) -> tuple[PhaseFolder | None, str]:
    """The folder of phase ``key`` when several folders carry its number (milestones that restart
    their numbering): the one STATE.md's ``Phase:`` line ``text`` names (its folder name, or the
    words of its name), else the one whose name the roadmap gives the phase and is not left over;
    with the reason. One folder: that one."""
    same = [f for f in folders if f.key == key]
    if len(same) <= 1:
        return (same[0] if same else None), ""
    return _folder_state_names(same, text) or _folder_roadmap_names(same, names)


def _folder_state_names(same: Sequence[PhaseFolder], text: str) -> tuple[PhaseFolder, str] | None:
    """Of several folders with one number, the one STATE.md's ``Phase:`` line ``text`` names by its
    folder name, else by the words of its name, with the reason; None when it names no one."""
    count = f"{len(same)} folders numbered {_show(same[0].key)}"
    exact = [f for f in same if f.name.lower() in text.lower()]
    if len(exact) == 1:
        return exact[0], f"{exact[0].name} named by STATE.md's Phase line ({count})"
    said = name_words(re.sub(r"^\s*\d+(?:\.\d+)*", "", text))
    worded = [f for f in same if said and same_name(f.words, said)]
    if len(worded) == 1:
        return worded[0], f"{worded[0].name}: STATE.md's Phase line names it ({count})"
    return None


def _folder_roadmap_names(same: Sequence[PhaseFolder],
                          names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]]) -> tuple[PhaseFolder, str]:
    """Of several folders with one number, the one not left over whose name ROADMAP.md gives the
    phase last, with the reason; none named: the first not left over (no reason)."""
    key = same[0].key
    fresh = [f for f in same if _leftover(f, names) is None] or same
    lines = {f.path: max((line for line, n in names.get(key, ()) if same_name(f.words, name_words(n))), default=0)
             for f in fresh}
    if not any(lines.values()):
        return fresh[0], ""
    pick = max(fresh, key=lambda f: lines[f.path])
    return pick, (f"{pick.name}: of {len(same)} folders numbered {_show(key)}, the one ROADMAP.md:{lines[pick.path]} "
                  "names last")


def _plan_number(plan_id: str) -> int:
    return int(plan_id.rsplit("-", 1)[1])


def _plan_order(plan_id: str) -> tuple[str, int]:
    """Plans in order: by the part letter of a lettered phase ("2A-02" before "2B-01"), then number."""
    prefix, number = plan_id.rsplit("-", 1)
    return re.sub(r"[\d.]", "", prefix).upper(), int(number)


@dataclass(frozen=True)
class GsdPosition:
    """Where a GSD project stands, what decided it and where the sources disagree."""

    milestone: str | None = None
    milestone_name: str | None = None
    phase: str | None = None  # "8.1"
    folder: str | None = None  # relative to .planning/, "/"-separated
    plan: str | None = None  # the next plan's id, "08.1-05"
    plans_done: int = 0
    plans_total: int = 0
    phase_complete: bool = False
    milestone_complete: bool = False
    source: str = NONE  # pinned | frontmatter | body | files | none
    evidence: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    expects_folder: bool = False  # a phase is current and should have a folder
    unfinished: tuple[str, ...] = ()  # phases whose (active) folder has plans without a SUMMARY, or no plans
    next_phase: str | None = None  # the current phase is complete: the roadmap's next phase not done
    next_folder: str | None = None  # its folder, when it has one
    next_title: str | None = None  # its roadmap heading ("Phase 15: Link Sharing and Search")
    context: tuple[str, ...] = ()  # the current folder's CONTEXT / RESEARCH file names
    next_context: tuple[str, ...] = ()  # the next phase folder's
    parts: tuple[str, ...] = ()  # a phase in lettered folders: every part's folder (folder is the first)
    between: bool = False  # between milestones: STATE.md names no phase, the last milestone is over
    unverified: bool = False  # between milestones, STATE.md says the last phase still awaits verification

    def as_dict(self) -> dict:
        return {
            "milestone": self.milestone,
            "milestone_name": self.milestone_name,
            "phase": self.phase,
            "folder": self.folder,
            "plan": self.plan,
            "plans_done": self.plans_done,
            "plans_total": self.plans_total,
            "phase_complete": self.phase_complete,
            "milestone_complete": self.milestone_complete,
            "source": self.source,
            "evidence": list(self.evidence),
            "next_phase": self.next_phase,
            "between_milestones": self.between,
        }

    def line(self) -> str:
        """One line for the context: milestone, phase (folder), next plan, what decided it."""
        if self.between:
            return "Position: " + self._between_line() + f" [from {self.source}]"
        parts = []
        if self.milestone:
            name = self.milestone_name or ""
            parts.append((f"milestone {name}" if self.milestone in name.split() else
                          f"milestone {self.milestone}" + (f" {name}" if name else ""))
                         + (" (complete)" if self.milestone_complete else ""))
        if self.phase:
            state = "complete" if self.phase_complete else f"{self.plans_done} of {self.plans_total} plans done"
            parts.append(f"phase {self.phase}" + (f" ({self._folders()}, {state})" if self.folder else ""))
        if self.plan:
            parts.append(f"next plan {self.plan}")
        elif self.next_phase:
            parts.append(f"next phase {self.next_phase}" + (f" ({self.next_folder}/)" if self.next_folder
                                                           else " (not planned yet)"))
        if not parts:
            return "Position: unknown (no STATE.md position and no phase folder)"
        return "Position: " + "; ".join(parts) + f" [from {self.source}]"

    def _folders(self) -> str:
        """The folder, and the other lettered parts of the phase ("phases/2A-backend/ + 2B-plugin/")."""
        return f"{self.folder}/" + "".join(f" + {p.rsplit('/', 1)[-1]}/" for p in self.parts[1:])

    def _between_line(self) -> str:
        """Between milestones: the milestone (complete, or the next one not started), no current
        phase, the last finished one, and the next step."""
        head = "between milestones"
        if self.milestone:
            name = self.milestone_name or ""
            label = name if self.milestone in name.split() else f"{self.milestone} {name}".strip()
            head += f": milestone {label} " + ("complete" if self.milestone_complete else "not started")
        last = (f"; no current phase (the last finished: phase {self.phase}, {self._folders()})" if self.phase and self.folder
                else "; no current phase")
        step = ("verify the last phase (STATE.md says it awaits verification)" if self.unverified
                else "start the next milestone (/gsd:new-milestone)")
        return head + last + "; next: " + step

    def note(self) -> str:
        """What decided the position, in one string (the disclosure rules quote it)."""
        return "; ".join(self.evidence) or "no GSD position"


def phase_folders(folders: Mapping[str, Sequence[str]]) -> tuple[PhaseFolder, ...]:
    """The phase folders among ``folders`` (path relative to .planning/ -> file names), sorted by
    phase number (8 < 8.1 < 8.2 < 9); an active ``phases/`` folder before an archived one."""
    out = []
    for path, names in folders.items():
        key = dir_phase_key(path.rstrip("/").rsplit("/", 1)[-1])
        if key is None:
            continue
        plans: dict[int, str] = {}
        done = set()
        context = []
        for name in names:
            match = _PLAN_FILE.match(name)
            if match:
                plan_id = f"{match.group(1)}-{match.group(2)}"
                plans[int(match.group(2))] = plan_id
                if match.group(3) == "SUMMARY":
                    done.add(plan_id)
            elif name.upper().endswith(("CONTEXT.MD", "RESEARCH.MD")):
                context.append(name)
        ordered = tuple(plans[n] for n in sorted(plans))
        out.append(PhaseFolder(path.rstrip("/"), key, ordered, tuple(p for p in ordered if p in done),
                               tuple(sorted(context)), bool(_ARCHIVED.search(path))))
    return tuple(sorted(_with_parts_joined(out), key=lambda f: (f.key, f.archived, f.path)))


def _with_parts_joined(folders: Sequence[PhaseFolder]) -> list[PhaseFolder]:
    """The lettered parts of one phase (phases/2A-backend, 2B-plugin, 2C-assets) as one folder of
    phase 2: the first part's path, every part's plans (2A-01 ... 2C-02) and CONTEXT/RESEARCH."""
    groups: dict[tuple, list[PhaseFolder]] = {}
    out = []
    for f in folders:
        if dir_phase_part(f.name):
            groups.setdefault((f.path.rsplit("/", 1)[0] if "/" in f.path else "", f.key, f.archived), []).append(f)
        else:
            out.append(f)
    for parts in groups.values():
        parts.sort(key=lambda f: dir_phase_part(f.name))
        out.append(PhaseFolder(parts[0].path, parts[0].key, tuple(p for f in parts for p in f.plans),
                               tuple(p for f in parts for p in f.done), tuple(c for f in parts for c in f.context),
                               parts[0].archived, parts=tuple(f.path for f in parts)))
    return out


def _with_roadmap_plans(folder: PhaseFolder, listed: RoadmapPlans | None) -> PhaseFolder:
    """The folder with the plans ROADMAP.md names for its phase (listed, or counted) added."""
    if listed is None:
        return folder
    if not folder.plans:
        return folder  # nothing done or planned in the folder yet: the plan-phase step writes the PLANs
    for number, line, text in listed.listed:
        folder = folder.with_named([number], f"ROADMAP.md:{line} '{_cut(text)}'", number in listed.ticked)
    return folder.with_total(listed.total[0], f"ROADMAP.md:{listed.total[1]} '{_cut(listed.total[2])}'") \
        if listed.total else folder


def _cut(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _by_key(folders: Sequence[PhaseFolder]) -> dict[tuple[int, ...], PhaseFolder]:
    out: dict[tuple[int, ...], PhaseFolder] = {}
    for folder in folders:
        out.setdefault(folder.key, folder)  # sorted: the active folder comes first
    return out


def _show(key: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in key)


def _pending_files(folder: PhaseFolder) -> str:
    """The folder's first plans without a SUMMARY, as PLAN file names ("08.1-01-PLAN.md, ... ...")."""
    return ", ".join(p + "-PLAN.md" for p in folder.pending[:3]) + (" ..." if len(folder.pending) > 3 else "")


def _files(folder: PhaseFolder) -> str:
    names = [f"{p}-PLAN.md" for p in folder.plans[:3]] or list(folder.context[:2])
    return ", ".join(names) + (" ..." if len(folder.plans) > 3 else "")


@dataclass
class _Notes:
    """The evidence and the warnings a reading of the position gathers, in the order found."""

    evidence: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Reading:
    """What one reading of the position works from: STATE.md (None when absent), where it is,
    the phase folders (the roadmap's plans added to the active ones), the plans and the phase
    names ROADMAP.md gives, and the active folders (replaced when the reading learns more)."""

    state: GsdState | None
    where: str  # STATE.md's path, for the warnings
    folders: tuple[PhaseFolder, ...]
    active: tuple[PhaseFolder, ...]
    plans: Mapping[tuple[int, ...], RoadmapPlans]
    names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]]

    @property
    def archived(self) -> list[PhaseFolder]:
        return [f for f in self.folders if f.archived]

    def with_active(self, old: PhaseFolder, new: PhaseFolder) -> "_Reading":
        """This reading with the active folder at ``old``'s path replaced by ``new``."""
        return replace(self, active=tuple(new if f.path == old.path else f for f in self.active))


@dataclass(frozen=True)
class _Claim:
    """The phase STATE.md names: its number, which part of STATE.md said it (FRONTMATTER or
    BODY), whether STATE.md says it is complete, and ``between``: STATE.md names no phase and
    says the milestone is over."""

    key: tuple[int, ...] | None = None
    source: str = NONE
    said_complete: bool = False
    between: bool = False


def read_position(
    state: GsdState | None,
    folders: Mapping[str, Sequence[str]],
    pinned: str = "",
    state_path: str = ".planning/STATE.md",
    roadmap_phases: Sequence[str] = (),
    roadmap_plans: Mapping[tuple[int, ...], RoadmapPlans] | None = None,
    roadmap_names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]] | None = None,
) -> GsdPosition:
    """The position of a GSD project from STATE.md (parsed; None when absent), its phase folders
    (path relative to .planning/ -> file names), the pin ``state.gsdPhase``, the phase
    numbers of the current milestone in ROADMAP.md (to count ``progress.completed_phases``) and
    the plans ROADMAP.md names per phase (:func:`roadmap_plans`: a plan the roadmap lists, or
    counts in "1/2 plans executed", is a plan of the phase even when its PLAN file was never
    committed; so is each plan of STATE.md's "Plan: 2 of 2") and every name the roadmap gives each
    phase number (:func:`phase_names`: which of several folders with one number is meant, and
    which folders are left over from a renumbered milestone).

    The steps: 1. a pinned phase wins; 2. else the phase STATE.md names (frontmatter over body);
    none named: the first open phase folder (or between milestones); 3. the files as evidence:
    the phase's folder, its plans, and a later folder already started when the phase is done."""
    notes = _Notes()
    reading = _reading_of(state, folders, state_path, roadmap_plans or {}, roadmap_names or {})
    pin = str(pinned or "").strip()
    if pin:
        return _pinned_position(reading, pin, pinned, notes)
    claim = _state_claim(reading, roadmap_phases, notes)
    if claim.between:
        return _from_files(reading, notes, milestone_over=True)
    if claim.key is None:
        return _from_files(reading, notes, milestone_over=False)
    folder, reading = _claimed_folder(reading, claim, notes)
    later = _later_started_folder(reading, claim, folder, notes)
    if later is not None:
        return _position(reading, notes, later, later.key, FILES, expects=True)
    _completion_notes(reading, claim, folder, notes)
    return _position(reading, notes, folder, claim.key, claim.source, named_plan=_named_plan(state, claim),
                     said_complete=claim.said_complete, milestone_complete=_milestone_over(state, claim),
                     expects=_expects_folder(state, claim))


def _reading_of(state: GsdState | None, folders: Mapping[str, Sequence[str]], where: str,
                plans: Mapping[tuple[int, ...], RoadmapPlans],
                names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]]) -> _Reading:
    """The reading's start: the phase folders, each active one with the plans ROADMAP.md names for it."""
    every = tuple(_with_roadmap_plans(f, plans.get(f.key)) if not f.archived else f for f in phase_folders(folders))
    return _Reading(state, where, every, tuple(f for f in every if not f.archived), plans, names)


def _position(reading: _Reading, notes: _Notes, folder: PhaseFolder | None, key: tuple[int, ...] | None,
              source: str, *, named_plan: int | None = None, said_complete: bool = False,
              milestone_complete: bool = False, expects: bool = False, between: bool = False) -> GsdPosition:
    """The position at phase ``key`` (its ``folder``, None when it has none) decided by ``source``:
    the next plan, the phase's counts, what the folder adds to the evidence, and a warning when a
    phase is current but has no folder."""
    state = reading.state
    plan = _folder_plan(folder, named_plan, notes)
    if folder is None and key is not None and expects:
        notes.warnings.append(_no_folder_warning(reading.where, key))
    return GsdPosition(
        milestone=state.milestone if state else None, milestone_name=state.milestone_name if state else None,
        phase=_show(key) if key is not None else None, plan=plan, phase_complete=_phase_complete(folder, said_complete),
        milestone_complete=milestone_complete and not _not_started(state), source=source,
        evidence=tuple(notes.evidence), warnings=tuple(notes.warnings), expects_folder=expects,
        unfinished=_unfinished(reading), between=between, unverified=between and _says_unverified(state),
        **_folder_fields(folder),
    )


def _folder_plan(folder: PhaseFolder | None, named_plan: int | None, notes: _Notes) -> str | None:
    """The next plan of the phase's ``folder`` (None without one), its evidence and what the
    folder itself tells added to ``notes``."""
    if folder is None:
        return None
    plan = _next_plan(folder, named_plan, notes)
    notes.evidence.extend(_folder_evidence(folder))
    return plan


def _phase_complete(folder: PhaseFolder | None, said_complete: bool) -> bool:
    """Whether the phase is complete: by its folder when it has plans (files or named), else as
    STATE.md says."""
    return folder.complete if folder is not None and (folder.plans or folder.named) else said_complete


def _no_folder_warning(where: str, key: tuple[int, ...]) -> str:
    """The warning for a current phase without a folder (``where``: STATE.md's path)."""
    return (f"{where.rsplit('/', 1)[0]}: no phase folder for phase {_show(key)} (looked in "
            "phases/ and milestones/*-phases/); create it or pin another phase with state.gsdPhase")


def _unfinished(reading: _Reading) -> tuple[str, ...]:
    """The active phase folders not complete, by phase number."""
    return tuple(_show(f.key) for f in reading.active if not f.complete)


def _folder_fields(folder: PhaseFolder | None) -> dict:
    """The position's fields its phase folder gives: path, plan counts, CONTEXT files, lettered parts."""
    if folder is None:
        return {"folder": None, "plans_done": 0, "plans_total": 0, "context": (), "parts": ()}
    return {"folder": folder.path, "plans_done": len(folder.done), "plans_total": len(folder.all_plans),
            "context": folder.context, "parts": folder.parts}


def _next_plan(folder: PhaseFolder, named_plan: int | None, notes: _Notes) -> str | None:
    """The next plan of ``folder``: the one STATE.md names (``named_plan``) when it has no SUMMARY,
    else the first plan without a SUMMARY; None when every plan has one."""
    pending = folder.pending
    named = next((p for p in pending if _plan_number(p) == named_plan), None) if named_plan else None
    if named:
        notes.evidence.append(f"STATE.md names plan {named_plan}: {named} is in progress")
        return named
    if pending:
        notes.evidence.append(f"next plan {pending[0]}: the first plan without a SUMMARY")
        return pending[0]
    return None


def _folder_evidence(folder: PhaseFolder) -> list[str]:
    """What the folder itself tells: a phase in lettered folders, plans named without a file."""
    out = []
    if len(folder.parts) > 1:
        out.append(f"phase {_show(folder.key)} is in {len(folder.parts)} lettered folders ("
                   + ", ".join(p.rsplit("/", 1)[-1] + "/" for p in folder.parts) + "): their plans are its plans")
    if folder.named:
        out.append(f"{', '.join(folder.named)} without a PLAN or SUMMARY file in {folder.path}/, "
                   "named by " + "; ".join(folder.named_by) + " (a checked box: done)")
    return out


def _says_unverified(state: GsdState | None) -> bool:
    """STATE.md's status or Phase line says the last phase still awaits verification."""
    return bool(state and _UNVERIFIED.search(" ".join(filter(None, (state.status, state.field("phase"))))))


def _pinned_position(reading: _Reading, pin: str, pinned: str, notes: _Notes) -> GsdPosition:
    """Step 1: the phase ``state.gsdPhase`` pins (a ConfigError when it is not a phase number),
    with a warning when it has no folder."""
    if not _PIN.match(pin):
        raise ConfigError(f"key 'state.gsdPhase' is {quoted(pinned)}; give a phase number such as 12 or 8.1 "
                          "(or \"\" to read the phase from STATE.md and the phase folders)")
    key = phase_key(pin)
    folder = _by_key(reading.folders).get(key)
    notes.evidence.append(f"state.gsdPhase pins phase {pin}" + (f" ({folder.path}/)" if folder else ""))
    if folder is None:
        notes.warnings.append(f"state.gsdPhase: phase {pin} has no folder under .planning/phases/ or "
                              ".planning/milestones/*-phases/; the plan section shows no plans (create the folder "
                              "or pin an existing phase)")
    return _position(reading, notes, folder, key, PINNED)


def _body_phase(state: GsdState) -> tuple[int | None, str | None]:
    """The line and the text of STATE.md's ``Phase:`` (or ``Current Phase:``) field."""
    return (state.line_of("phase") or state.line_of("current phase"),
            state.field("phase") or state.field("current phase"))


def _frontmatter_key(state: GsdState, where: str, active: Sequence[PhaseFolder], roadmap_phases: Sequence[str],
                     body_key: tuple[int, ...] | None) -> tuple[tuple[int, ...] | None, str, bool]:
    """(phase, where it is said, stale) from STATE.md's frontmatter: its phase key, else the phase
    after ``progress.completed_phases`` of the ordered phases (folders and roadmap) when the body's
    phase is among the completed ones; ``stale``: every phase is counted complete but the body
    does not say so."""
    if state.fm_phase is not None:
        name, value = state.fm_phase
        return phase_key(value), f"{where}:{state.key_lines.get(name, 1)} frontmatter {name}: {value}", False
    if state.fm_progress is None or state.fm_complete:
        return None, "", False
    done, total = state.fm_progress
    order = sorted({f.key for f in active} | {k for k in map(phase_key, roadmap_phases) if k})
    said = (f"{where}:{state.key_lines.get('progress.completed_phases', 1)} frontmatter "
            f"progress.completed_phases: {done} of {total}")
    if body_key is None or body_key not in order[:done]:
        return None, said, False
    if done < len(order):
        return order[done], said, False
    return None, said, not state.body_complete


def _state_claim(reading: _Reading, roadmap_phases: Sequence[str], notes: _Notes) -> _Claim:
    """Step 2: the phase STATE.md names, the frontmatter over the body's ``Phase:`` line (a
    warning when they differ); naming none, whether the milestone is over (``between``), else
    the phase of the plan ``stopped_at`` names; no STATE.md: no claim."""
    state, where = reading.state, reading.where
    if state is None:
        return _Claim()
    body_line, body_text = _body_phase(state)
    body_key = phase_key(state.body_phase)
    fm_key, fm_where, stale = _frontmatter_key(state, where, reading.active, roadmap_phases, body_key)
    if fm_key is not None:
        notes.evidence.append(fm_where.replace(f"{where}:", "STATE.md:") + f" -> phase {_show(fm_key)}")
        if body_key is not None and body_key != fm_key:
            notes.warnings.append(f"{where}:{body_line}: the body says 'Phase: {body_text}' but {fm_where} says phase "
                                  f"{_show(fm_key)}; the frontmatter is used (update the stale line)")
        return _Claim(fm_key, FRONTMATTER, state.fm_complete or (state.body_complete and body_key == fm_key))
    if body_key is not None:
        notes.evidence.append(f"STATE.md:{body_line} 'Phase: {body_text}'")
        if stale:
            notes.warnings.append(f"{where}:{body_line}: the body says 'Phase: {body_text}' but {fm_where} counts "
                                  f"phase {_show(body_key)} as complete; update the stale line")
        return _Claim(body_key, BODY, state.complete or stale)
    return _unnamed_claim(state, body_line, body_text, notes)


def _unnamed_claim(state: GsdState, body_line: int | None, body_text: str | None, notes: _Notes) -> _Claim:
    """STATE.md names no phase number: between milestones when its Phase line or status says so
    (or it says complete), else the phase of the plan frontmatter ``stopped_at`` names."""
    said = body_text or state.status or ""
    between = bool(_BETWEEN.search(said)) or state.fm_complete or state.complete
    if body_text:
        notes.evidence.append(f"STATE.md:{body_line} 'Phase: {body_text}'")
    if between:
        return _Claim(between=True)
    if state.stopped_at is None:
        return _Claim()
    phase, _, text = state.stopped_at  # no "Phase:" line: the plan it stopped at names the phase
    key = phase_key(phase)
    notes.evidence.append(f"STATE.md:{state.key_lines.get('stopped_at', 1)} frontmatter stopped_at: {text} "
                          f"-> phase {_show(key)} (no 'Phase:' line)")
    return _Claim(key, FRONTMATTER)


def _claimed_folder(reading: _Reading, claim: _Claim, notes: _Notes) -> tuple[PhaseFolder | None, _Reading]:
    """Step 3: the folder of the claimed phase (of several with its number, the one STATE.md or
    the roadmap names), with the plans of STATE.md's "Plan: N of M" added, and its plans done when
    STATE.md and ROADMAP.md's checked box say the phase is complete; the reading with it."""
    state, key = reading.state, claim.key
    said = (_body_phase(state)[1] or "") if state else ""
    folder, chosen = _named_folder(key, said, reading.active, reading.names)
    if folder is None:
        folder = _by_key(reading.folders).get(key)
    elif chosen:
        notes.evidence.append(chosen)
    if folder is None:
        return None, reading
    counted = _with_state_total(folder, state, claim)
    if counted is not folder:
        reading = replace(reading, active=tuple(counted if f is folder else f for f in reading.active))
        folder = counted
    done = _with_roadmap_done(folder, reading.plans.get(key), claim, notes)
    if done is not folder:
        reading, folder = reading.with_active(done, done), done
    return folder, reading


def _with_state_total(folder: PhaseFolder, state: GsdState | None, claim: _Claim) -> PhaseFolder:
    """The folder with the plans STATE.md's "Plan: N of M" counts for the phase it names."""
    if (state is None or not state.plan_total or claim.source not in (BODY, FRONTMATTER)
            or phase_key(state.body_phase) != claim.key):
        return folder
    return folder.with_total(state.plan_total, f"STATE.md:{state.line_of('plan')} 'Plan: {state.field('plan')}'")


def _with_roadmap_done(folder: PhaseFolder, listed: RoadmapPlans | None, claim: _Claim, notes: _Notes) -> PhaseFolder:
    """The folder with every plan done when STATE.md says the phase is complete and ROADMAP.md
    checks its box (the SUMMARYs were not committed), with the evidence."""
    checked = listed.done if listed else None
    if not (claim.said_complete and checked and folder.pending):
        return folder
    notes.evidence.append(f"{', '.join(folder.pending)} without a SUMMARY in {folder.path}/, done by STATE.md and "
                          f"ROADMAP.md:{checked[0]} '{_cut(checked[1], 70)}' (SUMMARYs not committed)")
    return replace(folder, done=folder.all_plans)


def _later_started_folder(reading: _Reading, claim: _Claim, folder: PhaseFolder | None,
                          notes: _Notes) -> PhaseFolder | None:
    """The claimed phase is complete (STATE.md says so, or all its plans have a SUMMARY) and a
    LATER folder, not left over from a renumbered milestone, is started: that folder, with a
    warning; else None."""
    files_complete = bool(folder and folder.complete)
    if not (claim.said_complete or files_complete):
        return None
    later = _open_folders([f for f in reading.active if f.key > claim.key], reading.names, notes, "not the next phase")
    if not later:
        return None
    nxt = later[0]
    why = "STATE.md says it is complete" if claim.said_complete else "all its plans have a SUMMARY"
    own = (f"; its own {_pending_files(folder)} in {folder.path}/ have no SUMMARY"
           if claim.said_complete and folder is not None and folder.pending else "")
    state = reading.state
    notes.warnings.append(f"{reading.where}:{(state.line_of('phase') or 1) if state else 1}: names phase "
                          f"{_show(claim.key)} ({why}), but {nxt.path}/ already holds {_files(nxt)}; phase "
                          f"{_show(nxt.key)} is taken as current (pin another with state.gsdPhase){own}")
    notes.evidence.append(f"phase {_show(claim.key)} complete ({why}); {nxt.path}/ holds {_files(nxt)}")
    return nxt


def _completion_notes(reading: _Reading, claim: _Claim, folder: PhaseFolder | None, notes: _Notes) -> None:
    """Where STATE.md and the files disagree on whether the phase is complete: a warning when
    STATE.md says complete but plans lack a SUMMARY; evidence when the files say complete (and a
    warning when STATE.md's ``Plan:`` says one is under way)."""
    state, where = reading.state, reading.where
    if claim.said_complete and folder is not None and folder.pending:
        line = (state.line_of("status") or state.line_of("phase") or 1) if state else 1
        notes.warnings.append(f"{where}:{line}: says phase {_show(claim.key)} is complete, but "
                              f"{_pending_files(folder)} in {folder.path}/ have no SUMMARY")
    elif folder is not None and folder.complete and not claim.said_complete:
        notes.evidence.append(f"every plan of {folder.path}/ has a SUMMARY: the phase is complete")
        if state is not None and state.plan is not None and claim.source in (BODY, FRONTMATTER):
            notes.warnings.append(f"{where}:{state.line_of('plan')}: 'Plan: {state.field('plan')}' is under way, but "
                                  f"every plan of {folder.path}/ has a SUMMARY ({', '.join(folder.done[-2:])}); the "
                                  "phase is read as complete (update STATE.md)")


def _milestone_over(state: GsdState | None, claim: _Claim) -> bool:
    """STATE.md says the milestone is complete, or that its last phase (``Phase: 12 of 12``) is."""
    return bool(state and (state.fm_complete or (claim.said_complete and state.phase_total
                                                 and phase_key(state.phase_total) == claim.key)))


def _expects_folder(state: GsdState | None, claim: _Claim) -> bool:
    """The claimed phase is under way (a plan named, or an executing status): it should have a folder."""
    status = (state.status or "") if state else ""
    return not claim.said_complete and bool((state and state.plan is not None) or _EXECUTING.search(status))


def _named_plan(state: GsdState | None, claim: _Claim) -> int | None:
    """The plan number STATE.md names as in progress (none when it says the phase is complete)."""
    return state.plan if state and claim.source in (BODY, FRONTMATTER) and not claim.said_complete else None


def _not_started(state: GsdState | None) -> bool:
    """STATE.md's ``Milestone:`` line says the milestone is not started ("v1.4 (not started)")."""
    return bool(state and _NOT_STARTED.search(state.field("milestone") or ""))


def _from_files(reading: _Reading, notes: _Notes, milestone_over: bool) -> GsdPosition:
    """No phase number from STATE.md: the first started phase folder not yet complete and not left
    over from a renumbered milestone (after a milestone: only the latest folder, when it is new
    work), else the latest folder, complete (after a milestone, an archived one when its number is
    higher: the finished milestone's phases moved to milestones/<version>-phases/)."""
    active = reading.active
    archived = reading.archived if milestone_over else []
    if not active and not (milestone_over and archived):
        if milestone_over:
            notes.evidence.append("between milestones: no phase is current")
        return _position(reading, notes, None, None, NONE if not notes.evidence else FILES,
                         milestone_complete=milestone_over, between=milestone_over)
    open_ = _open_folders(active, reading.names, notes, "not current")
    if milestone_over:
        open_ = [f for f in open_ if active and f is active[-1]]
    if open_:
        notes.evidence.append(f"{open_[0].path}/ holds {_files(open_[0])} without a SUMMARY for each plan")
        return _position(reading, notes, open_[0], open_[0].key, FILES, expects=True)
    latest = _latest_folder(active, archived)
    notes.evidence.append(f"latest phase folder {latest.path}/" + (" (milestone complete)" if milestone_over else ""))
    if milestone_over:
        notes.evidence.append(f"between milestones: no phase is current; the last finished is {latest.path}/")
    return _position(reading, notes, latest, latest.key, FILES, said_complete=True, milestone_complete=milestone_over,
                     between=milestone_over)


def _open_folders(folders: Sequence[PhaseFolder], names: Mapping[tuple[int, ...], Sequence[tuple[int, str]]],
                  notes: _Notes, so: str) -> list[PhaseFolder]:
    """The started folders not complete, in order, without the ones left over from a renumbered
    milestone (each of those is named in the evidence, ending with ``so``: what it is not)."""
    out = []
    for f in folders:
        if f.started and not f.complete:
            why_not = _leftover(f, names)
            if why_not:
                notes.evidence.append(f"{why_not}, {so}")
            else:
                out.append(f)
    return out


def _latest_folder(active: Sequence[PhaseFolder], archived: Sequence[PhaseFolder]) -> PhaseFolder:
    """The latest phase folder: the last active one, or the last archived one when its number is higher."""
    latest = active[-1] if active else archived[-1]
    return archived[-1] if archived and archived[-1].key > latest.key else latest


@dataclass(frozen=True)
class GsdFiles:
    """What the position is read from: STATE.md and ROADMAP.md (None when absent) and each phase
    folder's file names (folder relative to .planning/, "/"-separated)."""

    state_text: str | None = None
    roadmap_text: str | None = None
    folders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # reading STATE.md and ROADMAP.md under the trust rules
    state_path: str = ".planning/STATE.md"  # where state_text was read (a workstream's STATE.md)
    workstreams: Mapping[str, "GsdFiles"] = field(default_factory=dict)  # .planning/workstreams/<name>/
    active_workstream: str | None = None  # the text of .planning/active-workstream, when present
    chosen: tuple[str, ...] = ()  # why this workstream is read (evidence), see workstreams.py
    chosen_warnings: tuple[str, ...] = ()  # the workstream choice was ambiguous


def position_of(files: GsdFiles, pinned: str = "") -> GsdPosition:
    """:func:`read_position` over the loaded files (STATE.md parsed, the milestone's phases
    read from ROADMAP.md), with why this workstream was read, the milestone settled against
    ROADMAP.md, and the next phase when the current one is complete."""
    state = parse_state(files.state_text, files.state_path) if files.state_text is not None else None
    roadmap = files.roadmap_text or ""
    milestone = state.milestone if state else None
    view = narrow_roadmap(roadmap, milestone) if roadmap else None  # once, for the phases and the plans
    phases = milestone_phases(roadmap, milestone, view) if roadmap else ()
    position = read_position(state, files.folders, pinned, files.state_path, phases,
                             roadmap_plans(roadmap, milestone, view) if roadmap else {},
                             phase_names(roadmap) if roadmap else {})
    position = replace(position, evidence=(*files.chosen, *position.evidence),
                       warnings=(*files.chosen_warnings, *position.warnings))
    return _next_phase(_milestone_settled(position, state, files, phases), roadmap, files.folders)


def _milestone_settled(position: GsdPosition, state: GsdState | None, files: GsdFiles,
                       phases: Sequence[str]) -> GsdPosition:
    """The position's milestone against ROADMAP.md: checked to list the phase, the frontmatter
    against the body's ``Milestone:`` line, inferred from the roadmap or the prose when STATE.md
    names none, and complete when the roadmap marks it shipped."""
    roadmap = files.roadmap_text or ""
    said = "frontmatter" if state is not None and state.frontmatter.get("milestone") is not None else "STATE.md"
    position = _milestone_checked(position, roadmap, phases, said)
    if state is not None:
        position = _milestone_disagreement(position, state, roadmap)
    unnamed = state is None or state.milestone is None
    if unnamed and roadmap:
        position = _milestone_inferred(position, roadmap)
    if unnamed and position.milestone is None:
        position = _milestone_from_prose(position, files.state_text or "", roadmap, files.state_path)
    if roadmap:
        position = _milestone_shipped(position, roadmap, files.folders, state, files.state_path)
    return position


def _milestone_shipped(position: GsdPosition, roadmap_text: str, folders: Mapping[str, Sequence[str]],
                       state: GsdState | None, state_path: str) -> GsdPosition:
    """STATE.md names a finished phase of a milestone ROADMAP.md marks shipped ("- ✅ **v19.4 ...**
    - Phases 206-214 (shipped 2026-04-06)"): the milestone is complete. When later phases of its
    range are complete too (STATE.md was not updated after them), the latest is the phase, with a
    warning naming both lines."""
    key = phase_key(position.phase)
    if (key is None or not position.milestone or position.milestone_complete or not position.phase_complete
            or position.source not in (FRONTMATTER, BODY)):
        return position
    shipped = _shipped_range(roadmap_text, position.milestone)
    if shipped is None or not (shipped[2] <= key <= shipped[3]):
        return position
    line_no, text, low, high = shipped
    said = f"ROADMAP.md:{line_no} '{_cut(text, 70)}'"
    done = [f for f in phase_folders(folders) if low[:1] <= f.key[:1] <= high[:1] and f.key > key and f.complete]
    if not done:
        return replace(position, milestone_complete=True,
                       evidence=(*position.evidence, f"milestone {position.milestone} shipped: {said}"))
    return _finished_after(position, done, said, state, state_path)


def _shipped_range(roadmap_text: str, milestone: str) -> tuple[int, str, tuple[int, ...], tuple[int, ...]] | None:
    """(1-based line, the line, first phase, last phase) of the first ROADMAP.md line that marks
    ``milestone`` shipped and gives its phase range, or None."""
    for line_no, line in enumerate(roadmap_text.split("\n"), 1):
        rng = _RANGE.search(line)
        if rng and milestone in milestone_tokens(line) and _SHIPPED.search(line):
            return line_no, line.strip(), phase_key(rng.group(1)), phase_key(rng.group(2))
    return None


def _finished_after(position: GsdPosition, done: Sequence[PhaseFolder], said: str, state: GsdState | None,
                    state_path: str) -> GsdPosition:
    """The position moved to the latest of the shipped milestone's phases ``done`` after the one
    STATE.md names (STATE.md was not updated after them), with a warning naming both lines."""
    last = done[-1]
    line = (state.line_of("phase") or state.line_of("current phase") or 1) if state else 1
    warning = (f"{state_path}:{line}: names phase {position.phase}, but {said} marks milestone {position.milestone} "
               f"shipped and {', '.join(_show(f.key) for f in done[-3:])} finished after it ({last.path}/); "
               f"phase {_show(last.key)} is read (update STATE.md)")
    return replace(position, phase=_show(last.key), folder=last.path, plan=None, plans_done=len(last.done),
                   plans_total=len(last.all_plans), milestone_complete=True, source=FILES, context=last.context,
                   warnings=(*position.warnings, warning),
                   evidence=(*position.evidence, f"milestone {position.milestone} shipped: {said}; the latest of its "
                             f"finished phases is {last.path}/"))


def _milestone_inferred(position: GsdPosition, roadmap_text: str) -> GsdPosition:
    """STATE.md names no milestone: the roadmap block that lists the current phase ("Milestone 2:
    Production v1.0 (Phases 11-17)") is the milestone, with the evidence; when the roadmap has
    milestone blocks and none lists the phase, a warning (the roadmap is read whole)."""
    key = phase_key(position.phase)
    if key is None:
        return position
    view = narrow_roadmap(roadmap_text, None)
    ranged = _ranged_milestone(roadmap_text, key)
    if ranged is not None:
        label = next((m for m in _labels(roadmap_text, ranged)), ranged)
        return replace(position, milestone=ranged, milestone_name=label,
                       evidence=(*position.evidence, f"STATE.md names no milestone; ROADMAP.md gives phase "
                                 f"{position.phase} to {ranged}'s range"))
    if not view.milestones:
        return position
    for candidate in view.milestones:
        if _lists_phase(roadmap_text, candidate, key):
            label = next((m for m in _labels(roadmap_text, candidate)), candidate)
            return replace(position, milestone=candidate, milestone_name=label,
                           evidence=(*position.evidence, f"STATE.md names no milestone; ROADMAP.md lists phase "
                                     f"{position.phase} under '{label}'"))
    warning = (f".planning/ROADMAP.md: milestones {', '.join(view.milestones)} and none lists phase {position.phase}, "
               "and STATE.md names no milestone; the roadmap is read whole (add milestone: to STATE.md's frontmatter)")
    return replace(position, warnings=(*position.warnings, warning))


_MILESTONE_FIELD = lazy_regex(r"^\s*[-*]?\s*\*{0,2}Milestone\*{0,2}\s*:\s*\*{0,2}\s*(v\d+(?:\.\d+)*)\b(.*)$", re.I)
_MILESTONE_PROSE = lazy_regex(r"\bmilestone\s+(v\d+(?:\.\d+)*)\b|\b(v\d+(?:\.\d+)*)\s+milestone\b", re.I)
_TO_COME = lazy_regex(r"\b(?:next|plan(?:ning)?|upcoming|future|start(?:ing)?|new)\b[^.;:]{0,20}$", re.I)


def _milestone_from_prose(position: GsdPosition, state_text: str, roadmap_text: str, state_path: str) -> GsdPosition:
    """No frontmatter, ``Milestone:`` line of STATE.md or roadmap block names a milestone: a
    ``**Milestone:** v1.0 Release`` line of ROADMAP.md, else the one version the prose of STATE.md and
    ROADMAP.md calls a milestone ("Milestone v1.0 gap closure done", "the v1.0 milestone audit";
    not "next milestone v2.0"). Several such versions: none, with a note (the evidence)."""
    for line_no, line in enumerate(roadmap_text.split("\n"), 1):
        field_ = _MILESTONE_FIELD.match(line)
        if field_:
            name = re.sub(r"[*_]", "", field_.group(1) + field_.group(2)).strip()
            return replace(position, milestone=field_.group(1), milestone_name=name,
                           evidence=(*position.evidence, f"ROADMAP.md:{line_no} '{_cut(line.strip())}' names milestone "
                                     f"{field_.group(1)} (STATE.md names none)"))
    said: dict[str, list[str]] = {}
    state_name = state_path.rsplit("/", 1)[-1]
    for name, text in ((state_name, state_text), ("ROADMAP.md", roadmap_text)):
        for line_no, line in enumerate(text.split("\n"), 1):
            for match in _MILESTONE_PROSE.finditer(line):
                if not _TO_COME.search(line[: match.start()]):
                    said.setdefault(match.group(1) or match.group(2), []).append(
                        f"{name}:{line_no} '{_cut(line.strip(), 100)}'")
    if len(said) == 1:
        version, lines = next(iter(said.items()))
        return replace(position, milestone=version, evidence=(
            *position.evidence, f"milestone {version} from the prose (no frontmatter, Milestone line or roadmap block "
            f"names one): {'; '.join(lines[:2])}"))
    if said:
        return replace(position, evidence=(*position.evidence, "no milestone: the prose names several ("
                                           + ", ".join(sorted(said)) + "), no frontmatter, Milestone line or "
                                           "roadmap block decides"))
    return position


def _labels(roadmap_text: str, milestone: str) -> list[str]:
    """The names of ``milestone``'s block headings in ROADMAP.md ("Milestone 2: Production v1.0")."""
    out = []
    for line in roadmap_text.split("\n"):
        heading = re.match(r"^\s*(?:#{1,6}\s+|<summary>)(.*?)(?:</summary>)?\s*$", line)
        if heading and milestone in milestone_tokens(heading.group(1)):
            name = re.sub(r"\s*\(.*$", "", _TAG.sub("", heading.group(1)).replace("**", "")).strip(" -—–:#")
            if name:
                out.append(name)
    return out


def _next_phase(position: GsdPosition, roadmap_text: str | None, folders: Mapping[str, Sequence[str]]) -> GsdPosition:
    """A complete current phase: the roadmap's next phase of the milestone whose folder is not
    complete (its folder, when there is one; else it is not planned yet)."""
    key = phase_key(position.phase)
    if not roadmap_text or key is None or not position.phase_complete or position.milestone_complete or position.between:
        return position
    by_key = _by_key([f for f in phase_folders(folders) if not f.archived])
    content = narrow_roadmap(roadmap_text, position.milestone).content
    titles = _phase_titles(content)
    later = _next_open_phase(key, titles, _ticked_phases(content), by_key)
    if later is None:
        return position
    folder = by_key.get(later)
    return replace(position, next_phase=_show(later), next_folder=folder.path if folder else None,
                   next_title=titles[later], next_context=folder.context if folder else (),
                   evidence=(*position.evidence, f"phase {position.phase} complete; ROADMAP.md's next phase is "
                             f"'{titles[later]}'" + (f" ({folder.path}/)" if folder else " (no folder yet)")))


def _next_open_phase(key: tuple[int, ...], titles: Mapping[tuple[int, ...], str], ticked: set[tuple[int, ...]],
                     by_key: Mapping[tuple[int, ...], PhaseFolder]) -> tuple[int, ...] | None:
    """The first roadmap phase after ``key`` not done: done is a folder whose plans all have a
    SUMMARY, or no folder and a checked roadmap box."""
    for later in sorted(k for k in titles if k > key):
        folder = by_key.get(later)
        if not (folder is not None and folder.complete or folder is None and later in ticked):
            return later
    return None


def _ticked_phases(roadmap_text: str) -> set[tuple[int, ...]]:
    """The phases whose roadmap checklist item is checked (``- [x] Phase 23: ...``)."""
    return {phase_key(m.group(1)) for m in map(_PHASE_ITEM.match, roadmap_text.split("\n"))
            if m and _TICKED.match(m.group(0))}


def _phase_titles(roadmap_text: str) -> dict[tuple[int, ...], str]:
    """Phase number -> its first heading or checklist line in ROADMAP.md ("Phase 15: Link Sharing")."""
    out: dict[tuple[int, ...], str] = {}
    for line in roadmap_text.split("\n"):
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        text = heading.group(1) if heading else line
        match = _PHASE_HEADING.match(text.replace("**", "").strip()) if heading else _PHASE_ITEM.match(line)
        if match:
            key = phase_key(match.group(1))
            title = re.sub(r"^\s*[-*]\s+\[[ xX]\]\s+", "", text).replace("**", "").strip()
            out.setdefault(key, title.split(" - ")[0].split(" — ")[0].strip())
    return out


def _milestone_checked(position: GsdPosition, roadmap_text: str | None, phases: Sequence[str],
                       said: str = "frontmatter") -> GsdPosition:
    """The position with its milestone checked against ROADMAP.md: when STATE.md names the phase
    and the roadmap lists phases for STATE.md's milestone but not that phase (a milestone left over from an earlier
    one), the milestone is the roadmap block that lists the phase, else none (the roadmap is then
    read whole, so the current phase's details are not folded away), with a warning."""
    key = phase_key(position.phase)
    if not _unlisted_phase(position, roadmap_text, phases, key):
        return position
    ranged = _ranged_milestone(roadmap_text, key)
    added = _added_after_range(roadmap_text, position.milestone, key) if ranged is None else None
    if added is not None:
        return replace(position, evidence=(*position.evidence, f"ROADMAP.md:{added} names phase {position.phase} "
                                           f"outside every milestone block and range: added to milestone "
                                           f"{position.milestone} (not shipped) after its range was written"))
    others = [m for m in narrow_roadmap(roadmap_text, None).milestones if m != position.milestone]
    found = ranged if ranged in others else next((m for m in others if _lists_phase(roadmap_text, m, key)), None)
    instead = f"read as milestone {found}, which lists it" if found else "read whole"
    warning = (f".planning/STATE.md: milestone {position.milestone} ({said}), but ROADMAP.md does not list phase "
               f"{position.phase} under it; the roadmap is {instead} (set milestone: in STATE.md to fix it)")
    return replace(position, milestone=found, milestone_name=None, warnings=(*position.warnings, warning),
                   evidence=(*position.evidence, f"ROADMAP.md lists phase {position.phase} under "
                             f"{'milestone ' + found if found else 'no milestone block'}"))


def _unlisted_phase(position: GsdPosition, roadmap_text: str | None, phases: Sequence[str],
                    key: tuple[int, ...] | None) -> bool:
    """STATE.md names the phase ``key`` and its milestone, and the roadmap lists ``phases`` for that
    milestone but not this one."""
    return (position.source in (FRONTMATTER, BODY) and bool(roadmap_text and position.milestone and key and phases)
            and key not in {phase_key(p) for p in phases})


def _added_after_range(roadmap_text: str, milestone: str, key: tuple[int, ...]) -> int | None:
    """The last ROADMAP.md line (1-based) naming phase ``key`` when every line that names it stands
    outside all milestone blocks and ``milestone`` is not shipped: the phase was added to the
    milestone after its range was written; else None."""
    placed = _phase_blocks(roadmap_text, key)
    if not placed or any(block is not None for _, block in placed) or _shipped_line(roadmap_text, milestone):
        return None
    return placed[-1][0]


def _lists_phase(roadmap_text: str, milestone: str, key: tuple[int, ...]) -> bool:
    """A block of ROADMAP.md names ``milestone`` and lists phase ``key`` under it."""
    view = narrow_roadmap(roadmap_text, milestone)
    return view.matched and key in {phase_key(p) for p in milestone_phases(roadmap_text, milestone, view)}


def _shipped_line(roadmap_text: str, milestone: str) -> tuple[int, str] | None:
    """(1-based line, the line stripped) of the first ROADMAP.md line marking ``milestone`` shipped, or None."""
    return next(((i + 1, line.strip()) for i, line in enumerate(roadmap_text.split("\n"))
                 if milestone in milestone_tokens(line) and _SHIPPED.search(line)), None)


def _phase_blocks(roadmap_text: str, key: tuple[int, ...]) -> list[tuple[int, str | None]]:
    """Each line of ROADMAP.md that heads or lists phase ``key`` (1-based) and the version of the
    innermost milestone block it stands in (None: in no milestone block)."""
    lines = _lines_of(roadmap_text)
    blocks = milestone_blocks(lines)
    out = []
    for idx, line in enumerate(lines):
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        match = _PHASE_HEADING.match(heading.group(1).replace("**", "").strip()) if heading else _PHASE_ITEM.match(line)
        if match and phase_key(match.group(1)) == key:
            inside = [b for b in blocks if b[0] <= idx <= b[1] and not (heading and b[0] == idx)]
            out.append((idx + 1, min(inside, key=lambda b: b[1] - b[0])[2][0] if inside else None))
    return out


def _ranged_milestone(roadmap_text: str, key: tuple[int, ...]) -> str | None:
    """The milestone whose label in ROADMAP.md gives a phase range holding ``key``
    ("- 📋 **v1.7 Observability & Analytics** — Phases 23–25 (planned)"), or None."""
    for line in roadmap_text.split("\n"):
        tokens = milestone_tokens(line)
        rng = _RANGE.search(line)
        if tokens and rng and phase_key(rng.group(1)) <= key <= phase_key(rng.group(2)):
            return tokens[0]
    return None


_SHIPPED = lazy_regex(r"✅|\bshipped\b|\bcomplete[d]?\b", re.I)


def _milestone_disagreement(position: GsdPosition, state: GsdState, roadmap_text: str) -> GsdPosition:
    """STATE.md's frontmatter ``milestone:`` and its body's ``Milestone:`` line name different
    milestones: a warning naming both lines. When ROADMAP.md marks the frontmatter's milestone
    shipped, the frontmatter is the stale one and the body's milestone is current (its version,
    or none when it names no version: the roadmap is then read whole)."""
    fm = state.frontmatter.get("milestone")
    body = state.field("milestone")
    if fm is None or not body or position.source == PINNED or position.milestone is None:
        return position
    fm_text = str(fm)
    tokens = milestone_tokens(body)
    if any(t.lower().lstrip("v") == fm_text.lower().lstrip("v") for t in tokens):
        return position
    body_line = state.line_of("milestone")
    fm_line = state.key_lines.get("milestone", 1)
    shipped = _shipped_line(roadmap_text, fm_text)
    where = f".planning/STATE.md:{fm_line} frontmatter milestone: {fm_text}"
    if shipped is None:
        warning = (f"{where}, but STATE.md:{body_line} says 'Milestone: {body}'; the frontmatter is used (update "
                   "the stale line)")
        return replace(position, warnings=(*position.warnings, warning))
    lead = body.replace("*", "").strip()
    version = tokens[0] if tokens and tokens[0].startswith(("v", "V")) and lead.startswith(tokens[0]) else None
    warning = (f"{where} is shipped (ROADMAP.md:{shipped[0]} '{_cut(shipped[1])}'), and STATE.md:{body_line} says "
               f"'Milestone: {body}'; the body's milestone is used (update the frontmatter)")
    return replace(position, milestone=version, milestone_name=body, warnings=(*position.warnings, warning),
                   evidence=(*position.evidence, f"STATE.md:{body_line} 'Milestone: {body}' (frontmatter milestone "
                             f"{fm_text} shipped, ROADMAP.md:{shipped[0]})"))

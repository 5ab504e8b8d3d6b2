"""Real GSD ``.planning/`` folders: STATE.md, ROADMAP.md, the phase folders and the position.

DESIGN.md ("Project layouts read", "Where GSD stands in a project"): no task has a status
field; progress is which SUMMARY files exist plus STATE.md's position. One concern a module:

* ``state``: STATE.md (position block, focus, blockers, todos, session, frontmatter);
* ``roadmap``: ROADMAP.md narrowed to the current milestone, finished phases shortened;
* ``plans``: a phase folder's PLAN / SUMMARY files (done, next, pending) and how they show;
* ``position``: ONE reading of where the project stands (milestone, phase, folder, plan),
  with its evidence and the warnings where the sources disagree;
* ``view``: the plan and roadmap sections' text from the files and the position;
* ``workstreams``: which workstream's files (.planning/workstreams/<name>/) the position is read from;
* ``work``: the phase type the position calls for (``--phase auto``) and its phase folder.

Everything here is pure: loader nodes hand in file contents and listings.
"""

from .common import dir_phase_key, is_phase_file, phase_key
from .plans import (DONE, NEXT, PENDING, GsdPlan, phase_plans, plan_body, plan_outline, plan_title, render_plans,
                    summary_one_liner)
from .position import (BODY, FILES, FRONTMATTER, NONE, PINNED, GsdFiles, GsdPosition, PhaseFolder, phase_folders,
                       position_of, read_position)
from .roadmap import RoadmapPlans, RoadmapView, milestone_phases, milestone_tokens, narrow_roadmap, roadmap_plans
from .state import GsdState, StateBlock, parse_state, position_line, render_state
from .view import gsd_view, roadmap_view
from .work import AUTO, PhaseWork, phase_work
from .workstreams import workstream_files

__all__ = [
    "AUTO", "PhaseWork", "phase_work", "roadmap_plans", "RoadmapPlans", "milestone_tokens",
    "BODY", "DONE", "FILES", "FRONTMATTER", "NEXT", "NONE", "PENDING", "PINNED",
    "GsdFiles", "GsdPlan", "GsdPosition", "GsdState", "PhaseFolder", "RoadmapView", "StateBlock",
    "dir_phase_key", "gsd_view", "is_phase_file", "milestone_phases", "narrow_roadmap", "parse_state",
    "phase_folders", "phase_key", "phase_plans", "plan_body", "plan_outline", "plan_title", "position_line", "position_of",
    "read_position", "workstream_files", "render_plans", "render_state", "roadmap_view", "summary_one_liner",
]

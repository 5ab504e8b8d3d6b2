"""Git state through the real ``git`` program, run safely, one concern per module:

* scope: which repository git may read for a project (nothing run)
* run: running git (:func:`run_git`, the one subprocess layer, and why a command failed)
* snapshot: one look at a repository (status, numstat, patch, log)
* status: pure parsing of git's outputs (status, numstat, hunks)
* state: the parsed state of a snapshot
* render: the git section's text

The names other modules use are re-exported here (``from ctxengine.nodes.lib import git``).
"""

from .render import render_git
from .run import GitResult, failure_reason, git_version, run_git
from .scope import repository_scope
from .snapshot import GitSnapshot, take_snapshot
from .state import GitState, git_state_from
from .status import parse_numstat, parse_status

__all__ = ["GitResult", "GitSnapshot", "GitState", "failure_reason", "git_state_from", "git_version", "parse_numstat",
           "parse_status", "render_git", "repository_scope", "run_git", "take_snapshot"]

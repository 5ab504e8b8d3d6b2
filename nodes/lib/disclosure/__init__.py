"""Progressive disclosure (moved here verbatim; split by concern in the next commit)."""

from .decide import *  # noqa: F401,F403

"""The references stage (moved here verbatim; split by concern in the next commit)."""

from .walk import *  # noqa: F401,F403

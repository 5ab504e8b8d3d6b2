"""The CLI's start-up Ctrl-C guard: a Ctrl-C while the command is still starting (its imports,
its own definitions) prints one line and exits 130, never a traceback.

Importing this module installs the guard (main thread only: elsewhere signal handlers cannot be
set, and there is no guard); pipeline/cli.py imports it before anything else and calls
:func:`lift` once it is defined, after which ``cli.run`` handles Ctrl-C itself.
"""

from __future__ import annotations

import os
import signal


def _exit_interrupted(signum=None, frame=None) -> None:
    """Ctrl-C while the command is still starting: nothing was done yet; one line, exit 130."""
    try:
        os.write(2, b"ctxengine: interrupted\n")
    finally:
        os._exit(130)


try:
    _HANDLER_BEFORE = signal.signal(signal.SIGINT, _exit_interrupted)
except ValueError:  # not the main thread
    _HANDLER_BEFORE = None


def lift() -> None:
    """Put back the SIGINT handler there was before the guard (importing the CLI changes nothing)."""
    if _HANDLER_BEFORE is not None:
        signal.signal(signal.SIGINT, _HANDLER_BEFORE)

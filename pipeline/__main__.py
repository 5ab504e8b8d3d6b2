"""``python -m ctxengine``: the same command as the ``ctxengine`` console script."""

from .cli import run

run()

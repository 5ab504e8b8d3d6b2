"""Reading the user's text files with errors that name the file and say how to fix it."""

from __future__ import annotations

from ..types import ConfigError


def read_config_text(path: str) -> str:
    """The text of a configuration or template file; a file that is not UTF-8 or cannot be
    read is a ConfigError naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None


"""The trust rules: what a build may read or fetch (``Trust``, from the ``trust.*`` keys), the
errors of a read that is refused or fails, and the hints that say how to widen trust.

A file is read only when its real path (symlinks resolved) is inside the project folder, under
one of ``trust.allowedPaths`` or under the installed ctxengine configs. A path outside the
project is refused before it is looked up (:func:`exit_point`), so the refusal reads the same
whether or not anything is there. A refusal raises ``Refused`` (a TextUnavailable) whose message
says what was left out and then, in parentheses, the setting that would allow the read;
:func:`without_widening_hints` takes those hints out where the reader is an agent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from ..regex import lazy_regex


class TextUnavailable(Exception):
    """A file or URL whose text cannot be had: missing, unreadable, binary, too large, too slow."""


class Refused(TextUnavailable):
    """A read the trust rules refuse (outside the project, not a regular file, a private
    address, a bad redirect, the build deadline spent); the message names the setting."""

SETTINGS_HINT = "in your user config or --set"
#: The hints that tell how to widen trust, in every form the refusals (here, in the git package,
#: state.py and config.py) write them: "... (add X to trust.allowedPaths ... to allow it)", "(raise it ...
#: --set)", "; set it in ~/.config/ctxengine/config.yaml or with --set".
_WIDENING_HINTS = lazy_regex(
    r" \((?:add|list|set|raise) .*?(?:to allow it|to allow private addresses|to follow more|--set"
    r"|to read one elsewhere)\)"
    r"|; set it in \S+ or with --set")


def without_widening_hints(text: str) -> str:
    """``text`` (a warning or an error) without the hints that tell how to widen trust: what was
    left out stays, which setting would let it in does not (for an agent, which reads untrusted
    project text and is not the one to widen what ctxengine reads)."""
    return _WIDENING_HINTS.sub("", text)


@dataclass(frozen=True)
class Trust:
    """What a build may read or fetch (from the ``trust.*`` keys) and for which project."""

    root: str  # the project folder, symlinks resolved
    allowed_paths: tuple[str, ...] = ()  # folders outside the project that may be read (resolved)
    allow_private_urls: bool = False
    allowed_hosts: tuple[str, ...] = ()  # lower case; empty: any public host
    max_redirects: int = 3
    connect_timeout: float = 5.0
    build_deadline: float = 20.0


def trust_from(context_config: Mapping[str, Any], project_dir: str) -> Trust:
    """The trust rules of a build from ``context_config["trust"]``; the installed ctxengine
    configs folder is always allowed (built-in templates and references)."""
    settings = _trust_settings(context_config)
    allowed = [*allowed_paths(context_config), os.path.realpath(_configs_folder())]
    return Trust(
        root=os.path.realpath(project_dir),
        allowed_paths=tuple(dict.fromkeys(allowed)),
        allow_private_urls=bool(settings.get("allowPrivateUrls", False)),
        allowed_hosts=tuple(str(h).strip().lower().strip("[]") for h in _as_list(settings.get("allowedHosts"))),
        max_redirects=max(0, int(settings.get("maxRedirects", 3))),
        connect_timeout=float(settings.get("urlConnectTimeout", 5.0)),
        build_deadline=float(settings.get("buildDeadline", 20.0)),
    )


def allowed_paths(context_config: Mapping[str, Any]) -> tuple[str, ...]:
    """The user's ``trust.allowedPaths`` with symlinks resolved: the one source of the folders
    outside the project that files (``trust_from``) and git (``take_snapshot``) may read. The
    configuration stage has already made them absolute and checked they are strings."""
    paths = _as_list(_trust_settings(context_config).get("allowedPaths"))
    return tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(str(p))) for p in paths))


def _trust_settings(context_config: Mapping[str, Any]) -> Mapping[str, Any]:
    settings = context_config.get("trust") if isinstance(context_config, Mapping) else None
    return settings if isinstance(settings, Mapping) else {}


def _as_list(value: Any) -> list:
    if value in (None, ""):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


@lru_cache(maxsize=1)
def _configs_folder() -> str:
    """The installed ctxengine configs folder (built-in templates, modes and references), looked up once."""
    try:
        return str(resources.files("ctxengine.configs"))
    except (ModuleNotFoundError, TypeError):
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        return os.path.join(package, "configs")  # (nodes/lib/textio/trust.py: four levels up)


def is_under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both absolute and normalised)."""
    folder = folder.rstrip(os.sep) or os.sep
    return path == folder or path.startswith(folder if folder == os.sep else folder + os.sep)


def trusted_path(path: str, trust: Trust) -> bool:
    """Whether the real path of ``path`` may be read: inside the project or an allowed folder."""
    real = os.path.realpath(path)
    return is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)


def outside_refusal(shown: str, path: str, trust: Trust) -> Refused:
    """The refusal of ``path`` (named ``shown``), which leads outside the trusted folders: it names
    where the path leaves them (:func:`exit_point`), never what lies beyond, so it reads the
    same whether the file outside exists or not, and whatever links are there."""
    real = exit_point(path, trust)
    folder = os.path.dirname(real) or real
    where = f"{shown} is" if shown == real else f"{shown} resolves to {real},"
    return Refused(f"{where} outside the project; not read (add {folder} to "
                   f"trust.allowedPaths {SETTINGS_HINT} to allow it)")


_MAX_LINKS = 40


def exit_point(path: str, trust: Trust) -> str:
    """Where ``path`` leaves the trusted folders (the project and ``trust.allowedPaths``): its
    symbolic links followed only while they are inside a trusted folder (the project's own) or
    on the way to one, the rest of the path as written. Nothing outside is looked at, so a
    refusal naming it says nothing of what exists there (a link outside, a folder, a file)."""
    folders = (trust.root, *trust.allowed_paths)

    def followable(candidate: str) -> bool:  # inside a trusted folder, or an ancestor of one
        return any(is_under(candidate, f) or is_under(f, candidate) for f in folders)

    pending = [p for p in os.path.abspath(path).split(os.sep) if p]
    current, links = os.sep, 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        candidate = os.path.dirname(current) if part == ".." else os.path.join(current, part)
        if not followable(candidate):
            real = os.path.realpath(candidate)  # the project named through a link of the user's
            if not followable(real):
                return os.path.normpath(os.path.join(candidate, *pending))
            current = real
            continue
        if part != ".." and os.path.islink(candidate) and links < _MAX_LINKS:
            links += 1
            target = os.readlink(candidate)
            pending[:0] = [p for p in target.split(os.sep) if p]
            current = os.sep if os.path.isabs(target) else current
            continue
        current = candidate
    return current

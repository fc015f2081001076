"""Names and paths: lowercase snake_case, and nothing ever outside the agent's folder."""

from __future__ import annotations

import re
from pathlib import Path

from ..exceptions import UnsafeNameError

__all__ = ["SNAKE", "check_agent_name", "check_topic", "safe_child"]

SNAKE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
# A name becomes part of a file name (``{type}_{YYYY-qN}_{topic}.md``, and the writer's temp file
# ``.{file}.{pid}.{ns}.tmp``); file systems allow 255 bytes. Past these, a clear refusal, not ENAMETOOLONG.
NAME_MAX_CHARS = 128
FILENAME_MAX_BYTES = 200


def _check(value: object, what: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise UnsafeNameError(f"{what} must be a non-empty string", field=field, rule="snake_case")
    if len(value) > NAME_MAX_CHARS:
        raise UnsafeNameError(f"{what} is {len(value)} characters; at most {NAME_MAX_CHARS}", field=field,
                              rule="max-length")
    if "/" in value or "\\" in value or value in (".", "..") or ".." in value or value.startswith("~"):
        raise UnsafeNameError(
            f"{what} {value!r} contains a path separator or '..'; names never leave their folder",
            field=field,
            rule="safe-path",
        )
    if not SNAKE.match(value):
        raise UnsafeNameError(
            f"{what} {value!r} is not lowercase snake_case (a-z, 0-9, single underscores)",
            field=field,
            rule="snake_case",
        )
    return value


def check_agent_name(name: object) -> str:
    """Refuse anything but a lowercase snake_case agent name.

    >>> check_agent_name("finance_agent")
    'finance_agent'
    """
    return _check(name, "agent name", "agent")


def check_topic(topic: object) -> str:
    """Refuse anything but a lowercase snake_case topic."""
    return _check(topic, "topic", "topic")


def safe_child(folder: Path, name: str, *, field: str = "filename") -> Path:
    """``folder / name`` if ``name`` is one plain file name inside ``folder``; else refuse."""
    if (
        not name
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or name.startswith(".")
        or Path(name).is_absolute()
    ):
        raise UnsafeNameError(
            f"{name!r} is not a plain file name inside {folder.name}/", field=field, rule="safe-path"
        )
    if len(name.encode("utf-8", "surrogateescape")) > FILENAME_MAX_BYTES:
        raise UnsafeNameError(f"file name is longer than {FILENAME_MAX_BYTES} bytes", field=field, rule="max-length")
    return folder / name

"""What is a unit, and what a snapshot leaves out: one rule, read by enumeration and snapshot alike.

A unit is ``<agent>/memory/<name>.md`` (a note) or ``<agent>/wiki/<name>.md``
(a wiki page) where ``<agent>`` starts with neither ``.`` nor ``_`` and
``<name>.md`` is neither a dot-file nor an ``INDEX`` sidecar (spec MUST 2).
Any agent name is an agent: ``log``, ``logs``, ``memory`` and ``wiki`` too.

A snapshot leaves out only what the spec calls "caches, logs, and other
regeneratable artifacts", at the places they live:

- top level: ``_migrations/`` (scripts, snapshots, audit), ``_dashboard/``,
  ``_cache/``, the memory store's ``_memory/``;
- an agent's own run-log folder, ``<agent>/log/`` (and ``<agent>/logs/``), not
  a folder of that name anywhere else, and not an agent called ``log``;
- at any depth: dot-entries (``.git/``, lock files, atomic-write temp files),
  ``_cache/`` and ``__pycache__/`` folders, and files ending in a log, lock,
  temp or database suffix (``*.jsonl``, ``*.db`` ...).

Because both sides read these functions, every unit's resolved path is
covered by construction: :func:`covers_unit` is what enumeration asks of a
unit's real location before it hands the unit out, and :func:`is_excluded` is
what the snapshot walk prunes with. The property test in
``tests/migration/test_snapshot_coverage.py`` checks the two agree.
"""

from __future__ import annotations

__all__ = ["UNIT_FOLDERS", "covers_unit", "is_agent_name", "is_excluded", "is_unit_name"]

#: (folder under an agent, unit_type) of every kind of unit.
UNIT_FOLDERS = (("memory", "memory"), ("wiki", "wiki"))

_TOP_EXCLUDED = frozenset({"_migrations", "_dashboard", "_cache", "_memory"})
_ANY_DEPTH_DIR_EXCLUDED = frozenset({"_cache", "__pycache__"})
_AGENT_DIR_EXCLUDED = frozenset({"log", "logs"})  # <agent>/log/: depth 2 only
_SUFFIX_EXCLUDED = (".jsonl", ".tmp", ".pyc", ".lock", ".db", ".db-wal", ".db-shm", ".sqlite", ".sqlite3")


def is_agent_name(name: str) -> bool:
    """A top-level folder that holds an agent (``_migrations``, ``.git`` ... do not)."""
    return bool(name) and not name.startswith((".", "_"))


def is_unit_name(name: str) -> bool:
    """A file name under ``memory/`` or ``wiki/`` that is a unit (MUST 2: INDEX sidecars are not)."""
    if not name.endswith(".md") or name.startswith("."):
        return False
    return not (name == "INDEX.md" or name.startswith("INDEX_"))


def _dir_excluded(parts: tuple[str, ...]) -> bool:
    """Whether the folder at vault-relative ``parts`` is pruned from snapshots (its own name decides)."""
    name = parts[-1]
    if name.startswith(".") or name in _ANY_DEPTH_DIR_EXCLUDED:
        return True
    if len(parts) == 1:
        return name in _TOP_EXCLUDED
    return len(parts) == 2 and name in _AGENT_DIR_EXCLUDED


def is_excluded(parts: tuple[str, ...], *, is_dir: bool) -> bool:
    """Whether a vault-relative path (as parts) is left out of snapshots.

    A file is left out when any folder above it is, or by its own name.

    >>> is_excluded(("caldwell", "log"), is_dir=True), is_excluded(("log", "memory", "x.md"), is_dir=False)
    (True, False)
    """
    if not parts:
        return False
    if is_dir:
        return any(_dir_excluded(parts[:i]) for i in range(1, len(parts) + 1))
    if any(_dir_excluded(parts[:i]) for i in range(1, len(parts))):
        return True
    name = parts[-1]
    return name.startswith(".") or name.endswith(_SUFFIX_EXCLUDED)


def covers_unit(parts: tuple[str, ...]) -> bool:
    """Whether a unit whose resolved vault-relative path is ``parts`` is captured by a snapshot.

    A unit reached through a symlink may resolve anywhere in the vault; it is
    a unit only if that real place is one a snapshot keeps (else a rollback
    could not put it back).
    """
    return bool(parts) and ".." not in parts and not is_excluded(parts, is_dir=False)

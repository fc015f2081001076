"""The one exception tree of atomic-agents.

Every error a user can cause derives from :class:`AtomicAgentsError`, carries
its data as attributes (the file, the field, the rule, the record id) and has
a one-line ``str()`` fit for a CLI. Never match on the message text.

::

    AtomicAgentsError
    ├── ValidationError            bad input: .path .field .rule .record
    │   ├── UnsafeNameError        a name/path that would escape its folder
    │   │   └── UnsafePathError    a write/read through a symlink, or out of the agents root
    │   ├── FrontmatterParseError  YAML that does not parse: .line
    │   │   └── EncodingError      a file that is not UTF-8: .line .offset
    │   └── SecretRejectedError    content that looks like a secret: .pattern
    ├── NotFoundError              .path or .record
    ├── ConflictError              already exists / inconsistent state
    │   └── LockBusyError          another writer holds the lock
    ├── SchemaVersionError         a file newer than this package understands
    ├── ContextBudgetError         the always-loaded context parts exceed the token budget: .budget .parts
    ├── EmbedderMismatchError      store built with another embedding model
    ├── StoreError                 the memory store failed (backend errors mapped here)
    │   └── ModelIntegrityError    the embedding model file is not the pinned one (sha256)
    └── MigrationError             the migration framework refused or failed
        ├── MigrationRollbackUnavailable
        └── MigrationSnapshotNotFound
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing/pathlib stay unimported: the CLI's warm path imports this module
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "AtomicAgentsError",
    "ConflictError",
    "ContextBudgetError",
    "EmbedderMismatchError",
    "EncodingError",
    "FrontmatterParseError",
    "LockBusyError",
    "MigrationError",
    "MigrationRollbackUnavailable",
    "MigrationSnapshotNotFound",
    "ModelIntegrityError",
    "NotFoundError",
    "SchemaVersionError",
    "SecretRejectedError",
    "StoreError",
    "UnsafeNameError",
    "UnsafePathError",
    "ValidationError",
]


class AtomicAgentsError(Exception):
    """Root of every error raised by atomic-agents."""


class ValidationError(AtomicAgentsError):
    """Input refused by a rule. Names the file (or record), the field and the rule.

    >>> str(ValidationError("type is not in the taxonomy", path="memory/x.md", field="type", rule="taxonomy"))
    'memory/x.md: type: type is not in the taxonomy [taxonomy]'
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        field: str | None = None,
        rule: str | None = None,
        record: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.field = field
        self.rule = rule
        self.record = record
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path or (f"record {self.record}" if self.record else None)
        parts = []
        if where:
            parts.append(f"{where}: ")
        if self.field and not self.message.startswith(self.field):
            parts.append(f"{self.field}: ")
        parts.append(self.message)
        if self.rule:
            parts.append(f" [{self.rule}]")
        return "".join(parts)

    def to_dict(self) -> dict[str, str | int | None]:
        return {
            "path": self.path,
            "record": self.record,
            "field": self.field,
            "rule": self.rule,
            "message": self.message,
        }


class UnsafeNameError(ValidationError):
    """A name or path that is not lowercase snake_case, or would leave its folder."""


class UnsafePathError(UnsafeNameError):
    """A path that resolves outside the agents root, or a final symlink a write will not follow.

    ``.path`` is the path as the caller named it; ``.resolved`` where it really leads (if known).

    >>> str(UnsafePathError("is a symlink; writes never follow one", path="a/memory/INDEX.md"))
    'a/memory/INDEX.md: is a symlink; writes never follow one [symlink]'
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None, resolved: str | None = None,
                 rule: str = "symlink") -> None:
        self.resolved = resolved
        super().__init__(message, path=None if path is None else os.fspath(path), rule=rule)


class FrontmatterParseError(ValidationError):
    """The YAML frontmatter of a file does not parse. ``.line`` is 1-based in the file."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str = "frontmatter",
        rule: str = "yaml",
    ) -> None:
        self.line = line
        where = f"{path}:{line}" if (path is not None and line is not None) else path
        super().__init__(message, path=where, field=field, rule=rule)
        self.path = str(path) if path is not None else None

    def to_dict(self) -> dict[str, str | int | None]:
        """As :class:`ValidationError`'s, with ``line`` (the text shows it as ``path:line``)."""
        out = super().to_dict()
        out["line"] = self.line
        return out


class EncodingError(FrontmatterParseError):
    """A file (or input line) that is not UTF-8. ``.line`` holds the first bad byte, ``.offset`` its byte offset.

    A subclass of :class:`FrontmatterParseError` so every reader that reports
    an unparseable note and goes on reports an undecodable one the same way.

    >>> str(EncodingError(path="memory/x.md", line=3, offset=40))
    'memory/x.md:3: encoding: not UTF-8 (byte offset 40) [utf-8]'
    """

    def __init__(
        self, *, path: str | Path | None = None, line: int | None = None, offset: int | None = None, max_line: int | None = None
    ) -> None:
        self.offset = offset
        if max_line is not None:  # an input line longer than its reader reads (``/dev/zero``, a file without newlines)
            at = f"line {line}: " if line is not None else "a line "
            super().__init__(f"{at}longer than {max_line} bytes", path=path, line=line, field="encoding", rule="max-size")
            return
        at = f" (byte offset {offset})" if offset is not None else ""
        super().__init__(f"not UTF-8{at}", path=path, line=line, field="encoding", rule="utf-8")


class SecretRejectedError(ValidationError):
    """Content or metadata that looks like a secret. Names the pattern, never the secret."""

    def __init__(
        self, pattern: str, *, field: str = "content", record: str | None = None, path: str | Path | None = None
    ) -> None:
        self.pattern = pattern
        super().__init__(
            f"looks like a secret ({pattern}); secrets are never stored",
            path=path,
            field=field,
            rule="no-secrets",
            record=record,
        )


class NotFoundError(AtomicAgentsError):
    """A file, agent, note or record that does not exist."""

    def __init__(self, message: str, *, path: str | Path | None = None, record: str | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.record = record
        super().__init__(message)


class ConflictError(AtomicAgentsError):
    """The operation conflicts with what is there (already exists, already superseded, ...)."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        super().__init__(message)


class LockBusyError(ConflictError):
    """Another process holds the lock and did not release it in time."""


class SchemaVersionError(AtomicAgentsError):
    """A file declares a schema_version this package cannot read (newer than current)."""

    def __init__(self, message: str, *, path: str | Path | None = None, version: object = None) -> None:
        self.path = str(path) if path is not None else None
        self.version = version
        super().__init__(message)


class ContextBudgetError(AtomicAgentsError):
    """Persona, tools.md's rules and the pinned notes alone exceed the token budget (never dropped silently).

    ``parts`` maps each always-loaded part's source path to its size in tokens.
    """

    def __init__(self, message: str, *, budget: int, parts: dict[str, int]) -> None:
        super().__init__(message)
        self.message = message
        self.budget = budget
        self.parts = parts

    def __str__(self) -> str:
        return self.message


class EmbedderMismatchError(AtomicAgentsError):
    """Semantic search asked of a store whose vectors came from another model."""

    def __init__(self, message: str, *, stored: str | None = None, current: str | None = None) -> None:
        self.stored = stored
        self.current = current
        super().__init__(message)


class StoreError(AtomicAgentsError):
    """The memory store backend failed; the backend's own error is the ``__cause__``."""


class ModelIntegrityError(StoreError):
    """The embedding model file does not match the size and sha256 pinned in the code."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        super().__init__(message)


class MigrationError(AtomicAgentsError):
    """The schema-migration framework refused or failed a run."""


class MigrationRollbackUnavailable(MigrationError):
    """A real migration was asked of a backend that cannot roll back (spec MUST 5)."""


class MigrationSnapshotNotFound(MigrationError):
    """The snapshot named for a rollback does not exist."""

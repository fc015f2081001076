"""The script chain's value types (re-exported by :mod:`atomic_agents.migration`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["LoadedScript", "MigrationPlan"]


@dataclass(frozen=True)
class LoadedScript:
    """A migration script ``vN_to_vN+1.py``, imported and checked.

    ``module`` has ``FROM_VERSION``, ``TO_VERSION``, ``applies_to(unit)`` and ``migrate(unit)``.
    """

    path: Path
    from_version: int
    to_version: int
    module: ModuleType

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class MigrationPlan:
    """The contiguous chain of scripts from the vault's version to the target.

    An empty ``scripts`` means the vault is already at the target.
    """

    from_version: int
    to_version: int
    scripts: tuple[LoadedScript, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "scripts": [s.name for s in self.scripts],
        }

"""Finding, importing and chaining ``_migrations/vN_to_vN+1.py`` scripts.

The schema is global, so scripts live once in ``<agents_root>/_migrations/``,
not per agent, and every backend reads them from there. A plan is the
contiguous chain from the vault's version to the target; a gap, a broken
script or a target below the vault's version is refused before anything runs
(forward only).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

from ..exceptions import MigrationError
from ._types import LoadedScript, MigrationPlan

__all__ = [
    "MIGRATIONS_DIR",
    "SCRIPT_NAME",
    "build_plan",
    "list_scripts",
    "load_script",
    "parse_target_version",
]

MIGRATIONS_DIR = "_migrations"
# ASCII digits only: \d (and int()) would read "１" or "٢" as a version.
SCRIPT_NAME = re.compile(r"^v(?P<from>[0-9]+)_to_v(?P<to>[0-9]+)\.py\Z")
_TARGET = re.compile(r"^[vV]?(?P<n>[0-9]+)$")


class TargetVersionError(MigrationError, ValueError):
    """A ``--to`` value that is not ``vN`` or ``N`` (a usage error: also a ``ValueError``)."""


def parse_target_version(value: str | int) -> int:
    """``"v2"``, ``"V2"``, ``"2"`` or ``2`` -> ``2`` (ASCII digits only: ``"v１"`` is refused).

    >>> parse_target_version("v2"), parse_target_version("3")
    (2, 3)
    """
    if isinstance(value, bool):
        raise TargetVersionError(f"not a schema version: {value!r} (expected vN or N)")
    if isinstance(value, int):
        if value < 0:
            raise TargetVersionError(f"not a schema version: {value!r} (must be >= 0)")
        return value
    m = _TARGET.fullmatch(str(value).strip(" \t"))
    if m is None:
        raise TargetVersionError(f"not a schema version: {value!r} (expected vN or N, e.g. v2)")
    return int(m.group("n"))


def list_scripts(scripts_dir: Path) -> list[str]:
    """Script file names in ``scripts_dir``, by version."""
    if not scripts_dir.is_dir():
        return []
    found = [(int(m.group("from")), p.name) for p in scripts_dir.iterdir() if (m := SCRIPT_NAME.match(p.name))]
    return [name for _, name in sorted(found)]


# Loaded modules, keyed by (path, mtime_ns, size): a script edited on disk is re-imported.
_CACHE: dict[tuple[str, int, int], LoadedScript] = {}


def load_script(path: Path) -> LoadedScript:
    """Import one script and check its contract; :class:`MigrationError` names what is wrong."""
    m = SCRIPT_NAME.match(path.name)
    if m is None:
        raise MigrationError(f"{path}: a migration script must be named vN_to_vN+1.py")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise MigrationError(f"missing migration script {path}") from None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key in _CACHE:
        return _CACHE[key]
    digest = hashlib.sha1(str(key).encode()).hexdigest()[:12]
    mod_name = f"_atomic_agents_migration_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise MigrationError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken script: syntax error, bad import, crash at import time
        sys.modules.pop(mod_name, None)
        raise MigrationError(f"{path.name} is broken: {type(exc).__name__}: {exc}") from exc
    script = _check(path, module, int(m.group("from")), int(m.group("to")))
    _CACHE[key] = script
    return script


def _check(path: Path, module: ModuleType, from_v: int, to_v: int) -> LoadedScript:
    name = path.name
    if to_v != from_v + 1:
        raise MigrationError(f"{name}: a script moves exactly one version (vN_to_vN+1)")
    declared_from = getattr(module, "FROM_VERSION", None)
    declared_to = getattr(module, "TO_VERSION", None)
    if declared_from != from_v or declared_to != to_v:
        raise MigrationError(
            f"{name} is broken: FROM_VERSION/TO_VERSION are {declared_from!r}/{declared_to!r}, "
            f"the file name says {from_v}/{to_v}"
        )
    for fn_name in ("applies_to", "migrate"):
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise MigrationError(f"{name} is broken: it defines no {fn_name}(unit) function")
        try:
            params = [
                p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            continue
        if len(params) != 1:
            # The path-shaped contract (migrate(path, dry_run)) was removed by spec issue #429.
            raise MigrationError(
                f"{name} is broken: {fn_name} must take exactly one MigratableUnit argument "
                f"(the old path-shaped migrate(path, dry_run) contract is removed)"
            )
    return LoadedScript(path=path, from_version=from_v, to_version=to_v, module=module)


def build_plan(scripts_dir: Path, from_version: int, to_version: int) -> MigrationPlan:
    """The contiguous chain ``from_version`` -> ``to_version``; refuses gaps, broken scripts, downgrades."""
    if to_version < from_version:
        raise MigrationError(
            f"target v{to_version} is below the vault's version v{from_version}: migrations are forward only"
        )
    scripts: list[LoadedScript] = []
    for v in range(from_version, to_version):
        path = scripts_dir / f"v{v}_to_v{v + 1}.py"
        if not path.is_file():
            raise MigrationError(
                f"missing migration script {path}: the chain v{from_version} -> v{to_version} must be contiguous"
            )
        scripts.append(load_script(path))
    return MigrationPlan(from_version=from_version, to_version=to_version, scripts=tuple(scripts))

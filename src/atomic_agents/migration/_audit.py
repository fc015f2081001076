"""The audit trail: ``_migrations/migration.jsonl`` and the README history.

``migration.jsonl`` is append-only, one JSON object per line, each written
with a single ``O_APPEND`` write + fsync, so concurrent writers never
interleave and a crash leaves whole lines only (spec MUST 8). It lives in
``_migrations/``, which snapshots leave out, so it survives every restore.
``README.md`` gains one human-readable line per real run or manual rollback.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from .._io import append_line
from .._text import read_text
from ._types import MigrationEvent

__all__ = ["AUDIT_FILE", "HISTORY_FILE", "append_history", "make_event", "new_run_id", "read_events", "record_event"]

AUDIT_FILE = "migration.jsonl"
HISTORY_FILE = "README.md"

_README_HEADER = """# Migration history

Schema migrations of this vault. Scripts `vN_to_vN+1.py` live in this folder;
snapshots in `snapshots/`; the machine-readable audit trail is `migration.jsonl`.
Run `python -m atomic_agents.migrate --status` to see where the vault stands.

## History

"""


def new_run_id() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def make_event(
    *,
    run_id: str,
    agents_root: Path | str,
    from_version: int,
    to_version: int,
    units_touched: int = 0,
    dry_run: bool,
    rolled_back: bool = False,
    error: str = "",
) -> MigrationEvent:
    return MigrationEvent(
        run_id=run_id,
        timestamp=_now(),
        agents_root=str(agents_root),
        from_version=from_version,
        to_version=to_version,
        units_touched=units_touched,
        dry_run=dry_run,
        rolled_back=rolled_back,
        error=error,
    )


def record_event(audit_path: Path, event: MigrationEvent, *, root: Path) -> None:
    """Durably append one event line (inside ``root``, never through a symlink)."""
    append_line(audit_path, json.dumps(event.to_dict(), ensure_ascii=False, sort_keys=False), root=root,
                create_dirs=True)


def read_events(audit_path: Path) -> list[dict[str, Any]]:
    """Every event recorded so far (for tests and tooling); skips a torn last line."""
    if not audit_path.is_file():
        return []
    out = []
    for line in read_text(audit_path, universal_newlines=True).splitlines():  # not UTF-8: EncodingError
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def append_history(readme: Path, line: str, *, root: Path) -> None:
    """Add ``- <line>`` to the README's history, creating the README if needed."""
    if not readme.exists() and not readme.is_symlink():
        append_line(readme, _README_HEADER.rstrip("\n") + "\n", root=root, create_dirs=True)
    append_line(readme, f"- {_now()} {line}", root=root, create_dirs=True)

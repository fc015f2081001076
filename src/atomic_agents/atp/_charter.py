"""Charter ratification (notes, "Charter ratification").

The charter is ``.claude/agentic-team-charter.md`` in the project, else the global
``~/.claude/agentic-team-charter.md``. Its version is the SHA-256 of the file's exact
bytes (full hash in ``charter_version``; 16 hex characters shown). Blockers are
unreplaced template placeholders and active roles (``active_roles`` in
``.claude/agentic-team-config.yaml``) that the charter does not name; warnings are
leftover template example text and an unstated runtime gate. ``proceed`` means no
blockers and nothing deferred; otherwise the record says no-proceed and why.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import NotFoundError, ValidationError
from ._identity import load_team_config
from ._kinds import Kind, Role

__all__ = ["CHARTER_GOAL_ID", "CharterReview", "find_charter", "review_charter"]

CHARTER_GOAL_ID = "charter-ratification"
CHARTER_PATH = Path(".claude") / "agentic-team-charter.md"
_MAX_CHARTER_BYTES = 1_000_000

PLACEHOLDER = re.compile(
    r"<(PROJECT_NAME|PROJECT_PATH|DEFAULT_BRANCH|ORG_ID|WORKSPACE_ID|Short description|One-sentence|Boundary [0-9]+|TODO|FIXME|EXAMPLE)"
)
_EXAMPLE = re.compile(r"(?i)^\s*(?:>\s*)?(?:example\b|e\.g\.,? replace|<!--.*(?:template|example))")
_ACTIVE_LINE = re.compile(r"(?i)^\s*(?:[-*]\s*)?(?:\*\*)?active[ _-]roles?(?:\*\*)?\s*[:=]\s*(.+)$")
_GATE = re.compile(r"(?i)(approv|authori[sz]|gate|gating|permission|sign[- ]off)")


@dataclass(frozen=True)
class CharterReview:
    path: str
    charter_version: str
    blockers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    active_roles: list[str] = field(default_factory=list)

    @property
    def version(self) -> str:
        return self.charter_version[:16]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "version": self.version}


def find_charter(project_dir: Path, path: str | Path | None = None, *, home: Path | None = None) -> Path:
    if path is not None:
        p = Path(path)
        p = p if p.is_absolute() else project_dir / p
        if not p.is_file():
            raise NotFoundError(f"no charter at {p}", path=p)
        return p
    for candidate in (project_dir / CHARTER_PATH, (home or Path.home()) / CHARTER_PATH):
        if candidate.is_file():
            return candidate
    raise NotFoundError(f"no charter: looked for {project_dir / CHARTER_PATH} and ~/{CHARTER_PATH}", path=project_dir / CHARTER_PATH)


def review_charter(path: Path, project_dir: Path) -> CharterReview:
    """Hash the exact bytes and scan for blockers and warnings (reads the file once)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read: {exc.strerror}", path=path, rule="io") from None
    if len(raw) > _MAX_CHARTER_BYTES:
        raise ValidationError("the charter is larger than 1 MB", path=path, rule="size")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"not UTF-8 (byte {exc.start})", path=path, rule="encoding") from None
    blockers, warnings = [], []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        for m in PLACEHOLDER.finditer(line):
            blockers.append(f"line {n}: unreplaced placeholder <{m.group(1)}")
        if _EXAMPLE.search(line):
            warnings.append(f"line {n}: leftover template example text")
    cfg = load_team_config(project_dir)
    active = cfg.get("active_roles") or []
    if not isinstance(active, list):
        blockers.append("active_roles in .claude/agentic-team-config.yaml is not a list")
        active = []
    active = [str(r) for r in active]
    words = set(re.findall(r"[a-z]+", text.lower()))
    for role in active:
        if role not in Role.__members__.values():
            blockers.append(f"active role {role!r} in the team config is not an ATP role")
        elif role not in words:
            blockers.append(f"active role {role} (team config) is not named in the charter")
    # The other direction: roles the charter itself declares active ("Active roles: a, b") must be
    # active in the config too.
    for n, line in enumerate(lines, 1):
        declared = _ACTIVE_LINE.match(line)
        if declared is None:
            continue
        for role in sorted(set(re.findall(r"[a-z]+", declared.group(1).lower())) & set(Role.__members__.values())):
            if cfg and role not in active:
                blockers.append(f"line {n}: the charter makes {role} active, the team config does not")
    if "runtime" in active or "runtime" in words:
        if not any("runtime" in ln.lower() and _GATE.search(ln) for ln in lines):
            warnings.append("runtime gating not stated (who approves live operations)")
    try:
        shown = str(path.relative_to(project_dir))
    except ValueError:
        shown = str(path)
    return CharterReview(shown, hashlib.sha256(raw).hexdigest(), blockers, warnings, active)


def ratification_data(
    review: CharterReview, *, rater: str, deferrals: Sequence[tuple[str, str]], previous_record_id: str | None
) -> dict[str, Any]:
    deferred = [{"item": i, "reason": r} for i, r in deferrals]
    proceed = not review.blockers and not deferred
    reasons = review.blockers + [f"deferred: {d['item']} ({d['reason']})" for d in deferred]
    return {
        "stage": Kind.CHARTER.value,
        "owner_role": Role.ARCHIVIST.value,
        "charter_path": review.path,
        "charter_version": review.charter_version,
        "version": review.version,
        "rater": rater,
        "proceed": proceed,
        "status": "proceed" if proceed else "no-proceed",
        "reason": "no blockers" if proceed else "; ".join(reasons),
        "blockers": review.blockers,
        "warnings": review.warnings,
        "deferrals": deferred,
        **({"previous_record_id": previous_record_id} if previous_record_id else {}),
    }

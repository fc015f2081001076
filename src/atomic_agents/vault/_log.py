"""Run logs: one JSON object per line in ``log/YYYY-MM/YYYY-MM-DD.jsonl``.

Each line is validated against the spec's required fields, written with a
single ``O_APPEND`` write (so concurrent runs never interleave), and keeps
optional and unknown fields as given.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from .._io import append_line, inside_root
from .._text import decode_lines
from ..exceptions import EncodingError, ValidationError

if TYPE_CHECKING:
    from ._agent import Agent
    from ._log_entry import LogEntry

__all__ = ["LogEntry", "LogQueryResult", "append_log", "query_logs"]


def _validate(entry: dict[str, Any], where: str) -> LogEntry:
    if not isinstance(entry, dict):
        raise ValidationError("a log entry must be a JSON object", path=where, field="entry", rule="object")
    from pydantic import ValidationError as PydanticValidationError  # noqa: PLC0415 - writers and queries only

    from ._log_entry import LogEntry  # noqa: PLC0415

    try:
        return LogEntry.model_validate(entry)
    except PydanticValidationError as exc:
        problems = [_describe(err) for err in exc.errors()]
    if len(problems) == 1:
        fld, rule, msg = problems[0]
        raise ValidationError(msg, path=where, field=fld, rule=rule)
    fields = ", ".join(dict.fromkeys(f for f, _, _ in problems if f))
    raise ValidationError(f"{len(problems)} problems: " + "; ".join(f"{f}: {m}" for f, _, m in problems),
                          path=where, field=fields or None, rule="log-entry")


_CHOICES = {"trigger": ("cron", "skill", "api", "manual"), "status": ("ok", "error", "skipped")}
_TYPES = {"string_type": "a string", "int_type": "an integer", "bool_type": "true or false",
          "float_type": "a number", "list_type": "a list", "int_parsing": "an integer", "float_parsing": "a number"}


def _describe(err: Any) -> tuple[str | None, str, str]:
    """One pydantic error in our words: (field, rule, message). Never pydantic's wording."""
    loc = err.get("loc") or ()
    fld = ".".join(str(p) for p in loc) or None
    kind = err.get("type", "")
    given = err.get("input")
    if kind == "missing":
        return fld, "required", "required field is missing"
    if kind == "literal_error":
        allowed = ", ".join(_CHOICES.get(str(loc[0]) if loc else "", ()))
        return fld, "choice", f"{_short(given)} is not one of {allowed}"
    if kind in _TYPES:
        return fld, "field-type", f"must be {_TYPES[kind]}, got {_short(given)}"
    if kind == "greater_than_equal":
        return fld, "range", f"must be 0 or more, got {_short(given)}"
    if kind == "string_too_short":
        return fld, "required", "must not be empty"
    if kind == "value_error":  # our own validators (ts): their message is already ours
        ctx_error = (err.get("ctx") or {}).get("error")
        return fld, "timestamp" if fld == "ts" else "value", str(ctx_error) if ctx_error else "invalid value"
    return fld, "field-type", f"{_short(given)} is not accepted here"


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def log_path(agent: Agent, day: dt.date) -> Path:
    return agent.log_dir / f"{day:%Y-%m}" / f"{day:%Y-%m-%d}.jsonl"


def append_log(agent: Agent, entry: dict[str, Any]) -> Path:
    """Validate and append one run; the file is chosen by the date of ``ts``.

    >>> append_log(agent, {"ts": "2026-05-06T09:00:00+00:00", "trigger": "cron", "model": "m",
    ...                    "input_tokens": 10, "output_tokens": 5, "status": "ok", "summary": "daily"})  # doctest: +SKIP
    """
    agent.require()
    parsed = _validate(entry, str(agent.log_dir))
    path = log_path(agent, parsed.when.date())
    # Serialise the caller's dict, not the model: unknown fields and the ts string stay as given.
    # The folder is made and the file opened inside the root only, never through a symlink.
    append_line(path, json.dumps(entry, ensure_ascii=False, separators=(",", ":")), root=agent.agents_root,
                create_dirs=True)
    return path


@dataclass
class LogQueryResult:
    """Matching entries, totals, and any unreadable lines (named by file:line, never dropped silently)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        cost: list[float] = [e["cost_usd"] for e in self.entries if isinstance(e.get("cost_usd"), (int, float))]
        by_status: dict[str, int] = {}
        for e in self.entries:
            by_status[e["status"]] = by_status.get(e["status"], 0) + 1
        return {
            "runs": len(self.entries),
            "input_tokens": sum(e["input_tokens"] for e in self.entries),
            "output_tokens": sum(e["output_tokens"] for e in self.entries),
            "cost_usd": round(sum(cost), 6) if cost else 0.0,
            "by_status": by_status,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"entries": self.entries, "totals": self.totals(), "invalid": self.invalid}


def query_logs(
    agent: Agent,
    *,
    since: dt.date | None = None,
    until: dt.date | None = None,
    status: str | None = None,
    trigger: str | None = None,
    model: str | None = None,
) -> LogQueryResult:
    """Runs between two dates (inclusive), filtered by status, trigger and model."""
    agent.require()
    result = LogQueryResult()
    if not agent.log_dir.is_dir():
        return result
    for path in sorted(agent.log_dir.glob("*/*.jsonl")):
        try:
            day = dt.date.fromisoformat(path.stem)
        except ValueError:
            result.invalid.append(f"{path}: file name is not YYYY-MM-DD.jsonl")
            continue
        if (since and day < since) or (until and day > until):
            continue
        if not inside_root(agent.agents_root, path):
            result.invalid.append(f"{path}: resolves outside the agents root; not read")
            continue
        with open(path, "rb") as fh:
            for n, line in decode_lines(fh, path=path):
                if isinstance(line, EncodingError):
                    result.invalid.append(str(line))  # names file:line; the other lines still count
                    continue
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    _validate(entry, f"{path}:{n}")
                except (ValueError, RecursionError, ValidationError) as exc:
                    result.invalid.append(f"{path}:{n}: {exc}")
                    continue
                if status and entry["status"] != status:
                    continue
                if trigger and entry["trigger"] != trigger:
                    continue
                if model and entry["model"] != model:
                    continue
                result.entries.append(entry)
    return result


def __getattr__(name: str) -> object:  # PEP 562: the pydantic model loads when first asked for
    if name == "LogEntry":
        from ._log_entry import LogEntry  # noqa: PLC0415

        return LogEntry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

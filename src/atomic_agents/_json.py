"""One rendering of results as plain JSON values, shared by the CLI's ``--json`` and the MCP server.

>>> import datetime as dt
>>> to_jsonable({"when": dt.date(2026, 12, 1), "ids": ("a", "b")})
{'when': '2026-12-01', 'ids': ['a', 'b']}
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from pathlib import Path
from typing import Any

__all__ = ["to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """Models, dataclasses, paths, dates and enums as plain JSON values."""
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (dt.date, dt.datetime)):
        return obj.isoformat()
    if isinstance(obj, enum.Enum):
        return obj.value
    return obj

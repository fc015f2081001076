"""What every MCP tool is made of: a spec (name, description, JSON schema, hints), argument parsing, rendering.

The interfaces hold no logic: a handler reads its arguments through :class:`Args`
(typed, with eden-memory's legacy aliases), makes one library call and returns
plain JSON. Argument errors are :class:`~atomic_agents.exceptions.ValidationError`
naming the field and never the value (a mistyped value may be a secret).

This module imports nothing heavy (no mcp, no pydantic, no store): building the
tool list must not slow down ``initialize``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._json import to_jsonable
from ..exceptions import ValidationError

if TYPE_CHECKING:
    from ._context import Services

__all__ = ["EDEN_ALIASES", "Args", "ToolSpec", "boolean", "integer", "jsonable", "obj", "schema", "string", "strings"]

#: eden-memory's legacy argument names -> ours (spec: "Legacy aliases accepted on input").
EDEN_ALIASES: dict[str, str] = {
    "observer_id": "agent_id",
    "observed_id": "user_id",
    "fact": "content",
    "topic": "query",
    "top_k": "limit",
}

Handler = Callable[["Services", "Args"], Any]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what ``tools/list`` shows and the handler ``tools/call`` runs.

    ``read_only``/``destructive``/``idempotent`` become the MCP annotations
    (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``); ``aliases`` maps
    accepted legacy names to schema names.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def hints(self) -> dict[str, bool]:
        # A read-only tool is by definition not destructive and idempotent (MCP spec).
        if self.read_only:
            return {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
        return {"readOnlyHint": False, "destructiveHint": self.destructive, "idempotentHint": self.idempotent}


# ----------------------------------------------------------------- schemas
def string(description: str | None = None) -> dict[str, Any]:
    return _prop("string", description)


def integer(description: str | None = None, *, minimum: int | None = None) -> dict[str, Any]:
    p = _prop("integer", description)
    if minimum is not None:
        p["minimum"] = minimum
    return p


def boolean(description: str | None = None) -> dict[str, Any]:
    return _prop("boolean", description)


def obj(description: str | None = None) -> dict[str, Any]:
    return _prop("object", description)


def strings(description: str | None = None) -> dict[str, Any]:
    p = _prop("array", description)
    p["items"] = {"type": "string"}
    return p


def _prop(kind: str, description: str | None) -> dict[str, Any]:
    p: dict[str, Any] = {"type": kind}
    if description:
        p["description"] = description
    return p


def schema(properties: Mapping[str, dict[str, Any]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object schema; unknown keys are tolerated (legacy aliases, newer clients' extras)."""
    out: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    return out


# --------------------------------------------------------------- arguments
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", dict: "a JSON object", list: "a list"}


class Args:
    """A tool's arguments, read by type; ``None`` (JSON null) counts as not given.

    >>> a = Args({"observer_id": "builder", "top_k": 3}, aliases={"observer_id": "agent_id", "top_k": "limit"})
    >>> a.text("agent_id", required=True), a.integer("limit", default=5)
    ('builder', 3)
    """

    def __init__(self, raw: Mapping[str, Any] | None, *, aliases: Mapping[str, str] | None = None) -> None:
        if raw is not None and not isinstance(raw, Mapping):
            raise ValidationError("arguments must be a JSON object", field="arguments", rule="type")
        values = dict(raw or {})
        self._legacy: dict[str, str] = {}
        for old, new in (aliases or {}).items():
            if old in values:
                given = values.pop(old)
                if values.get(new) is None:  # the current name wins when both are given
                    values[new] = given
                    self._legacy[new] = old
        self._values = values

    def given(self, name: str) -> bool:
        """Whether ``name`` was sent at all (an explicit null counts: ``ttl_ms: null`` means never expire)."""
        return name in self._values

    def _get(self, name: str, kind: type, required: bool) -> Any:
        value = self._values.get(name)
        if value is None:
            if required:
                alias = next((old for old, new in EDEN_ALIASES.items() if new == name), None)
                also = f" (or its legacy name {alias})" if alias else ""
                raise ValidationError(f"{name} is required{also}", field=name, rule="required")
            return None
        # bool is an int in Python: true must not pass for a limit, 1 not for a flag.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            if kind is int and isinstance(value, float) and math.isfinite(value) and value.is_integer():
                return int(value)
            shown = self._legacy.get(name, name)
            raise ValidationError(f"{shown} must be {_TYPE_NAMES[kind]}, not {_json_type(value)}", field=name, rule="type")
        return value

    def text(self, name: str, *, required: bool = False, default: str | None = None) -> Any:
        value = self._get(name, str, required)
        return default if value is None else value

    def integer(self, name: str, *, required: bool = False, default: int | None = None) -> Any:
        value = self._get(name, int, required)
        return default if value is None else value

    def flag(self, name: str, *, default: bool = False) -> bool:
        value = self._get(name, bool, False)
        return default if value is None else bool(value)

    def mapping(self, name: str, *, required: bool = False) -> dict[str, Any] | None:
        value = self._get(name, dict, required)
        return None if value is None else dict(value)

    def texts(self, name: str) -> list[str]:
        value = self._get(name, list, False)
        if value is None:
            return []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ValidationError(f"{name}[{i}] must be a string, not {_json_type(item)}", field=name, rule="type")
        return list(value)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# --------------------------------------------------------------- rendering
#: The CLI's ``--json`` rendering, shared (one function for both interfaces).
jsonable = to_jsonable

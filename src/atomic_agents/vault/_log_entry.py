"""The run-log entry model (pydantic): loaded only by commands that write or query run logs."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

__all__ = ["LogEntry"]


class LogEntry(BaseModel):
    """One run. Required: ts, trigger, model, input_tokens, output_tokens, status, summary."""

    model_config = ConfigDict(extra="allow")

    ts: StrictStr
    trigger: Literal["cron", "skill", "api", "manual"]
    model: StrictStr = Field(min_length=1)
    input_tokens: StrictInt = Field(ge=0)
    output_tokens: StrictInt = Field(ge=0)
    status: Literal["ok", "error", "skipped"]
    summary: StrictStr
    error: StrictStr | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    cache_hit: StrictBool | None = None
    tools_called: list[Any] | None = None
    skill_invocation_id: StrictStr | None = None

    @field_validator("ts")
    @classmethod
    def _aware_iso(cls, v: str) -> str:
        try:
            parsed = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("must be an ISO 8601 timestamp") from None
        if parsed.tzinfo is None:
            raise ValueError("must carry a timezone (e.g. +00:00 or Z)")
        return v

    @property
    def when(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.ts.replace("Z", "+00:00"))

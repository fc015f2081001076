"""Items 8 and 9: journal entries and promotion; JSONL logs validated and queried."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from atomic_agents.exceptions import ValidationError
from atomic_agents.vault import Agent, append_journal, append_log, journal_path, promote_journal_item, query_logs

DAY = dt.date(2026, 5, 6)


def test_journal_format_and_append(agent: Agent) -> None:
    path = append_journal(agent, day=DAY, happened=["Reviewed budget"], decisions=["Avalanche"], questions=["3 or 6 months?"])
    assert path == agent.journal_dir / "2026-05" / "2026-05-06.md"
    append_journal(agent, day=DAY, happened=["Second thing"])
    text = path.read_text()
    assert text.startswith("# 2026-05-06 — Finance Coach journal\n")
    happened = text.split("## What happened\n")[1].split("\n## ")[0]
    assert happened.strip().splitlines() == ["- Reviewed budget", "- Second thing"]
    assert "## Captured to memory" in text and "## Open questions\n- 3 or 6 months?" in text


def test_promote_journal_item_to_note(agent: Agent) -> None:
    append_journal(agent, day=DAY, happened=["Operator hates surprise fees", "Other"])
    note = promote_journal_item(agent, DAY, "surprise fees", type="feedback", topic="flag_surprise_fees", confidence="high")
    assert note.meta["sources"] == ["journal/2026-05/2026-05-06.md"]
    assert note.meta["captured"] == DAY and "Operator hates surprise fees" in note.body
    captured = journal_path(agent, DAY).read_text().split("## Captured to memory\n")[1].split("\n## ")[0]
    assert "[feedback_flag_surprise_fees.md](../../memory/feedback_flag_surprise_fees.md)" in captured
    assert agent.validate() == []


def test_promote_unknown_item_is_clear(agent: Agent) -> None:
    append_journal(agent, day=DAY, happened=["one"])
    with pytest.raises(ValidationError) as err:
        promote_journal_item(agent, DAY, 5, type="user", topic="x_y")
    assert err.value.field == "item"


RUN = {"ts": "2026-05-06T07:00:00+02:00", "trigger": "cron", "model": "claude-sonnet-4-5", "input_tokens": 100,
       "output_tokens": 20, "status": "ok", "summary": "morning check"}


def test_log_append_keeps_optional_and_unknown_fields(agent: Agent) -> None:
    path = append_log(agent, {**RUN, "cost_usd": 0.5, "cache_hit": True, "my_field": {"k": 1}})
    assert path == agent.log_dir / "2026-05" / "2026-05-06.jsonl"
    assert json.loads(path.read_text()) == {**RUN, "cost_usd": 0.5, "cache_hit": True, "my_field": {"k": 1}}


@pytest.mark.parametrize(
    "change,field",
    [
        ({"ts": "2026-05-06T07:00:00"}, "ts"),  # no timezone
        ({"ts": "yesterday"}, "ts"),
        ({"trigger": "webhook"}, "trigger"),
        ({"input_tokens": -1}, "input_tokens"),
        ({"output_tokens": 1.5}, "output_tokens"),
        ({"status": "done"}, "status"),
        ({"summary": None}, "summary"),
        ({"model": ""}, "model"),
    ],
)
def test_log_validation_names_field_and_writes_nothing(agent: Agent, change: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        append_log(agent, {**RUN, **change})
    assert err.value.field == field
    assert not any(agent.log_dir.rglob("*.jsonl"))


def test_log_missing_field(agent: Agent) -> None:
    entry = dict(RUN)
    del entry["summary"]
    with pytest.raises(ValidationError) as err:
        append_log(agent, entry)
    assert (err.value.field, err.value.rule) == ("summary", "required")


def test_log_query_filters_and_totals(agent: Agent) -> None:
    append_log(agent, {**RUN, "cost_usd": 0.01})
    append_log(agent, {**RUN, "ts": "2026-05-07T07:00:00Z", "status": "error", "model": "haiku", "cost_usd": 0.02})
    append_log(agent, {**RUN, "ts": "2026-05-09T07:00:00Z", "trigger": "manual"})
    assert query_logs(agent).totals()["runs"] == 3
    r = query_logs(agent, since=dt.date(2026, 5, 7), until=dt.date(2026, 5, 8))
    assert [e["status"] for e in r.entries] == ["error"]
    assert query_logs(agent, trigger="manual").totals()["runs"] == 1
    t = query_logs(agent, model="claude-sonnet-4-5").totals()
    assert (t["runs"], t["input_tokens"], t["output_tokens"], t["cost_usd"]) == (2, 200, 40, 0.01)
    assert query_logs(agent, status="ok").totals()["by_status"] == {"ok": 2}


def test_log_query_reports_bad_lines_by_file_and_line(agent: Agent) -> None:
    path = append_log(agent, RUN)
    with open(path, "a") as fh:
        fh.write("{not json\n")
    r = query_logs(agent)
    assert len(r.entries) == 1 and len(r.invalid) == 1 and r.invalid[0].startswith(f"{path}:2:")

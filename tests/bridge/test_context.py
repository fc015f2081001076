"""Context assembly: fixed order, the budget held exactly, drops in the stated order and reported."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.atp import Identity, Ledger
from atomic_agents.bridge import MirrorHook, context, count_tokens, sync
from atomic_agents.exceptions import ContextBudgetError, ValidationError
from atomic_agents.memory import SQLiteMemoryStore
from atomic_agents.vault import Agent, Vault

from .conftest import TODAY, draft


@pytest.fixture
def filled(agent: Agent, store: SQLiteMemoryStore) -> Agent:
    (agent.path / "tools.md").write_text("# TOOLS\n\n## Write paths (own folder ONLY)\n- finance/memory/\n\n"
                                         "## Hard NOs\n- Never move money\n", encoding="utf-8")
    agent.create_notes([
        draft("scope_boundary", name="Scope boundary", description="Never give tax advice", pinned=True),
        draft("debt_order", name="Debt order", description="Pay the highest rate debt first"),
        draft("debt_snowball", name="Debt snowball", description="Smallest debt balance first when motivation lags"),
        draft("gym_days", type="user", name="Gym days", description="Trains Monday and Thursday"),
    ], today=TODAY)
    (agent.memory_dir / "INDEX_archive.md").write_text("# Archive sub-index\n\n- `Old` — old note\n", encoding="utf-8")
    sync(agent, store, today=TODAY)
    return agent


def kinds(ctx: object) -> list[str]:
    return [p.kind for p in ctx.parts]  # type: ignore[attr-defined]


def test_parts_in_the_fixed_order_with_sources_sizes_and_reasons(filled: Agent, store: SQLiteMemoryStore) -> None:
    ctx = context(filled, store, query="which debt first", budget=5000, today=TODAY)
    assert kinds(ctx)[:5] == ["persona", "persona", "persona", "tools", "pinned"]
    assert kinds(ctx)[5:7] == ["index", "sub_index"] and set(kinds(ctx)[7:]) == {"recalled"}
    assert "Never move money" in ctx.text and "finance/memory/" in ctx.text and "Never give tax advice" in ctx.text
    recalled = [p for p in ctx.parts if p.kind == "recalled"]
    assert {p.source for p in recalled} >= {"memory/feedback_debt_order.md"}
    assert "memory/feedback_scope_boundary.md" not in {p.source for p in recalled}  # pinned: in once
    assert all(p.score is not None and p.score >= 0.45 for p in recalled)
    data = json.loads(ctx.to_json())
    assert all({"kind", "source", "tokens", "reason"} <= set(p) for p in data["parts"])
    assert data["tokens"] == count_tokens(ctx.text) == ctx.tokens


def test_budget_is_held_exactly_and_drops_go_in_the_stated_order(filled: Agent, store: SQLiteMemoryStore) -> None:
    full = context(filled, store, query="which debt first", budget=100_000, today=TODAY)
    assert not full.dropped
    exact = context(filled, store, query="which debt first", budget=full.tokens, today=TODAY)
    assert exact.text == full.text and not exact.dropped
    one_less = context(filled, store, query="which debt first", budget=full.tokens - 1, today=TODAY)
    assert count_tokens(one_less.text) <= full.tokens - 1
    lowest = min((p for p in full.parts if p.kind == "recalled"), key=lambda p: (p.score, -p.order))
    assert [d.source for d in one_less.dropped] == [lowest.source]
    assert "over budget" in one_less.dropped[0].reason
    # the always-loaded parts as printed (a BPE counts the blank lines between parts, too)
    required = count_tokens("".join(p.text + "\n\n" for p in full.parts if p.required))
    assert required == sum(p.tokens for p in full.parts if p.required)
    tight = context(filled, store, query="which debt first", budget=required, today=TODAY)
    assert tight.tokens == required and count_tokens(tight.text) == required
    with pytest.raises(ContextBudgetError):
        context(filled, store, query="which debt first", budget=required - 1, today=TODAY)
    order = [d.kind for d in tight.dropped]
    assert order == sorted(order, key=["recalled", "sub_index", "index"].index)
    assert order[-2:] == ["sub_index", "index"]
    assert kinds(tight) == ["persona", "persona", "persona", "tools", "pinned"]
    for budget in range(required, full.tokens + 1, 7):
        ctx = context(filled, store, query="which debt first", budget=budget, today=TODAY)
        assert count_tokens(ctx.text) == ctx.tokens <= budget
        # strictly lowest first, and no more than needed: with the last drop back in it would not fit
        assert not ctx.dropped or ctx.tokens + ctx.dropped[-1].tokens > budget
        if ctx.dropped:
            assert int(ctx.dropped[-1].reason.split("context is ")[1].split()[0]) > budget


def test_persona_and_pinned_over_budget_is_an_error_naming_each_part(filled: Agent) -> None:
    with pytest.raises(ContextBudgetError) as exc:
        context(filled, budget=20)
    err = exc.value
    assert err.budget == 20
    assert set(err.parts) == {"persona/IDENTITY.md", "persona/SOUL.md", "persona/USER.md", "tools.md",
                              "memory/feedback_scope_boundary.md"}
    assert all(f"{src} {n}" in str(err) for src, n in err.parts.items())


def test_budget_comes_from_model_md(filled: Agent) -> None:
    with pytest.raises(ValidationError) as exc:
        context(filled)  # the skeleton's "Max system prompt: tokens" is blank
    assert exc.value.field == "Max system prompt"
    text = (filled.path / "model.md").read_text().replace("- Max system prompt: tokens", "- Max system prompt: 1.5k tokens")
    (filled.path / "model.md").write_text(text)
    ctx = context(filled)
    assert (ctx.budget, ctx.budget_source) == (1500, "model.md")


def test_identical_inputs_give_identical_output(filled: Agent, store: SQLiteMemoryStore) -> None:
    a = context(filled, store, query="which debt first", budget=300, today=TODAY)
    b = context(filled, store, query="which debt first", budget=300, today=TODAY)
    assert a.to_json() == b.to_json()


def test_goal_records_and_memories_recalled_for_it(filled: Agent, store: SQLiteMemoryStore) -> None:
    ledger = Ledger(store, Identity("acme", "acme/fin", "dispatcher"))
    g = ledger.start("Plan the debt payoff for the credit card", requester="alice")
    mem = store.remember("The credit card APR is 24 percent, the car loan 6", None, ledger.identity.scope)
    # Scores are calibrated (issue 8): the goal record's whole text as the query (ids, labels) is a weak
    # keyword match for the fake embedder, so the test asks about the goal in words.
    ctx = context(filled, store, goal=g.goal_id, query="credit card APR", identity=ledger.identity, budget=5000, today=TODAY)
    goal_parts = [p for p in ctx.parts if p.kind == "goal_record"]
    assert [p.source for p in goal_parts] == [f"atp:{g.id}"]
    assert g.goal_id in goal_parts[0].text
    assert [p.source for p in ctx.parts if p.kind == "goal_memory"] == [f"memory:{mem}"]
    tight = context(filled, store, goal=g.goal_id, query="credit card APR", identity=ledger.identity, budget=ctx.tokens - 1, today=TODAY)
    # the goal's memory goes; the notes for the query rank below it, so they are not even searched
    assert [(d.kind, d.source) for d in tight.dropped] == [("recalled", "query"), ("goal_memory", f"memory:{mem}")]
    assert tight.dropped[0].reason.startswith("not searched")
    # room for the goal's records but not the INDEX: the goal's memories are not even searched for
    records_only = sum(p.tokens for p in ctx.parts if p.required or p.kind == "goal_record")
    small = context(filled, store, goal=g.goal_id, identity=ledger.identity, budget=records_only, today=TODAY)
    assert [p.kind for p in small.parts][-1] == "goal_record" and small.tokens == records_only
    assert (small.dropped[0].kind, small.dropped[0].source) == ("goal_memory", f"goal:{g.goal_id}")
    assert "not searched" in small.dropped[0].reason and small.dropped[-1].kind == "index"


def test_without_a_query_the_goal_is_recalled_for_by_its_request(filled: Agent, store: SQLiteMemoryStore,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(store, Identity("acme", "acme/fin", "dispatcher"))
    g = ledger.start("Plan the debt payoff for the credit card", requester="alice", constraints=["no new loans"])
    mem = store.remember("The credit card APR is 24 percent, the car loan 6", None, ledger.identity.scope)
    asked: list[str] = []
    real = store.search_hybrid

    def spy(query: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(query)
        return real(query, *args, **kwargs)

    monkeypatch.setattr(store, "search_hybrid", spy)
    ctx = context(filled, store, goal=g.goal_id, identity=ledger.identity, budget=5000, today=TODAY)
    # the request in words, not the record's header (goal id, record id, stage: a weak match for every record)
    assert asked == ["Plan the debt payoff for the credit card"]
    assert [p.source for p in ctx.parts if p.kind == "goal_memory"] == [f"memory:{mem}"]


def test_agent_context_is_the_bridge(filled: Agent, store: SQLiteMemoryStore) -> None:
    assert filled.context(store, query="debt", budget=400, today=TODAY).text == \
        context(filled, store, query="debt", budget=400, today=TODAY).text


def test_a_query_needs_a_store(filled: Agent) -> None:
    with pytest.raises(ValidationError) as exc:
        context(filled, query="debt", budget=400)
    assert exc.value.field == "store"


def test_cli_context_and_vault_search(agents_root: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from atomic_agents.cli import main

    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(["--agents-root", str(agents_root), *args])
        out, err = capsys.readouterr()
        return int(exc.value.code or 0), out, err

    assert run("vault", "init", "fin")[0] == 0
    (agents_root / "_memory").mkdir()
    assert run("vault", "sync", "fin")[0] == 0  # creates the store: from now on writes keep the mirror
    assert run("vault", "new", "fin", "--type", "decision", "--topic", "budget_cap", "--name", "Budget cap",
               "--description", "Spend at most 2000 a month", "--source", "x", "--pinned")[0] == 0
    code, out, _ = run("vault", "search", "fin", "monthly spend budget", "--json")
    assert code == 0 and [h["path"] for h in json.loads(out)["hits"]] == ["memory/decision_budget_cap.md"]
    code, out, err = run("context", "fin", "--budget", "2000")
    assert code == 0 and "Spend at most 2000 a month" in out and "tokens (budget from --budget" in err
    code, out, _ = run("context", "fin", "--budget", "2000", "--format", "json", "--query", "budget")
    data = json.loads(out)
    assert code == 0 and data["tokens"] <= 2000
    assert {p["kind"] for p in data["parts"]} >= {"persona", "pinned", "index"}
    code, _, err = run("context", "fin", "--budget", "10")
    assert code == 1 and "persona/IDENTITY.md" in err and "Traceback" not in err


def test_sub_indexes_symlinked_inside_are_read_and_out_of_the_root_refused(filled: Agent, agents_root: Path) -> None:
    from atomic_agents.exceptions import UnsafePathError

    (agents_root / "shared.md").write_text("# Shared sub-index\n\r\n- `Shared` — inside\r\n", encoding="utf-8")
    (filled.memory_dir / "INDEX_shared.md").symlink_to(agents_root / "shared.md")
    (filled.memory_dir / "INDEX_folder.md").mkdir()  # not a file: no part
    os.mkfifo(filled.memory_dir / "INDEX_fifo.md")  # never opened for a blocking read
    ctx = context(filled, budget=100_000, today=TODAY)
    subs = {p.source: p.text for p in ctx.parts if p.kind == "sub_index"}
    assert subs == {"memory/INDEX_archive.md": "# Archive sub-index\n\n- `Old` — old note",
                    "memory/INDEX_shared.md": "# Shared sub-index\n\n- `Shared` — inside"}
    outside = agents_root.parent / "outside.md"
    outside.write_text("# Secret\n", encoding="utf-8")
    (filled.memory_dir / "INDEX_out.md").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        context(filled, budget=100_000, today=TODAY)


def test_the_store_is_not_searched_when_recalled_notes_could_not_fit(filled: Agent, store: SQLiteMemoryStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = store.search_hybrid

    def counting(query: str, *args: object, **kwargs: object) -> object:
        calls.append(query)
        return real(query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "search_hybrid", counting)
    full = context(filled, store, query="which debt first", budget=5000, today=TODAY)
    assert calls == ["which debt first"] and any(p.kind == "recalled" for p in full.parts)
    required = sum(p.tokens for p in full.parts if p.required)
    calls.clear()
    tight = context(filled, store, query="secret-ish query words", budget=required + 1, today=TODAY)
    assert calls == []  # the INDEX does not fit: nothing below it could, so recall never runs
    assert tight.dropped[0].kind == "recalled" and tight.dropped[0].source == "query"
    assert "not searched" in tight.dropped[0].reason and "secret-ish" not in tight.to_json()  # not echoed
    assert [d.kind for d in tight.dropped] == ["recalled", "sub_index", "index"]


def test_sub_indexes_in_the_order_index_md_lists_them(filled: Agent) -> None:
    for n in (2, 10, 1):
        (filled.memory_dir / f"INDEX_part_{n}.md").write_text(f"# Part {n}\n\n- `p{n}` — part {n}\n", encoding="utf-8")
    ctx = context(filled, budget=5000, today=TODAY)
    subs = [p.source for p in ctx.parts if p.kind == "sub_index"]
    assert subs == ["memory/INDEX_archive.md", "memory/INDEX_part_1.md", "memory/INDEX_part_2.md",
                    "memory/INDEX_part_10.md"]


def test_superseded_and_expired_notes_are_not_recalled_but_a_pinned_one_stays(filled: Agent,
                                                                               store: SQLiteMemoryStore) -> None:
    import datetime as dt

    hook = MirrorHook(store, today=lambda: TODAY)
    filled.write_hooks.append(hook)
    filled.create_notes([draft("debt_avalanche", name="Debt avalanche", description="Highest rate debt first, always"),
                         draft("debt_promo", type="project", name="Debt promo", description="Pay the debt promo first",
                               expires_at=TODAY + dt.timedelta(days=2)),
                         draft("debt_pinned", type="project", name="Debt pinned", description="Debt rule pinned",
                               expires_at=TODAY + dt.timedelta(days=2), pinned=True)], today=TODAY)
    filled.supersede("feedback_debt_order.md", "feedback_debt_avalanche.md", today=TODAY)
    later = TODAY + dt.timedelta(days=10)
    ctx = context(filled, store, query="which debt first", budget=5000, today=later)
    recalled = {p.source for p in ctx.parts if p.kind == "recalled"}
    assert "memory/feedback_debt_avalanche.md" in recalled
    assert not recalled & {"memory/feedback_debt_order.md", "memory/project_debt_promo.md"}  # superseded, expired
    assert "memory/project_debt_pinned.md" in {p.source for p in ctx.parts if p.kind == "pinned"}  # spec: always loaded

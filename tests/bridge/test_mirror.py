"""The vault mirrored into the memory store: incremental, exact, rebuildable, and never in the way of a write."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.bridge import MirrorHook, mirror_scope, search, sync
from atomic_agents.memory import HashingEmbedder, InMemoryMemoryStore, MemoryStore, SQLiteMemoryStore
from atomic_agents.vault import Agent, Vault, append_journal, lint_agent, promote_journal_item

from .conftest import TODAY, CountingEmbedder, draft, write_raw_notes


def mirror(store: MemoryStore, agent: Agent) -> dict[str, tuple[str, dict[str, Any]]]:
    """path -> (content, metadata without the store's own stamp): the mirror as a comparable value."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in store.scan(mirror_scope(agent).as_filter(), {"source": "vault"}):
        assert m.metadata["path"] not in out, "one memory per note"
        out[m.metadata["path"]] = (m.content, {k: v for k, v in m.metadata.items() if k != "stored_at"})
    return out


def test_second_sync_of_10000_unchanged_notes_embeds_nothing(agent: Agent, store: SQLiteMemoryStore,
                                                             embedder: CountingEmbedder) -> None:
    write_raw_notes(agent, 10_000)
    first = sync(agent, store, today=TODAY)
    assert len(first.added) == 10_000 and embedder.texts == 10_000
    embedder.texts = 0
    second = sync(agent, store, today=TODAY)
    assert second.unchanged == 10_000
    assert (second.added, second.updated, second.removed, second.marked) == ([], [], [], [])
    assert embedder.texts == 0


def test_edit_updates_delete_removes_and_touch_never_re_embeds(agent: Agent, store: SQLiteMemoryStore,
                                                               embedder: CountingEmbedder) -> None:
    agent.create_notes([draft("debt_order"), draft("risk_view", type="user")], today=TODAY)
    sync(agent, store, today=TODAY)
    agent.update("feedback_debt_order.md", {"description": "Avalanche: highest rate first"}, today=TODAY)
    embedder.texts = 0
    report = sync(agent, store, today=TODAY)
    assert report.updated == ["memory/feedback_debt_order.md"] and embedder.texts == 1
    assert "Avalanche: highest rate first" in mirror(store, agent)["memory/feedback_debt_order.md"][0]
    agent.touch("feedback_debt_order.md", today=TODAY + dt.timedelta(days=1))  # bytes change, text does not
    embedder.texts = 0
    assert sync(agent, store, today=TODAY).updated == ["memory/feedback_debt_order.md"]
    assert embedder.texts == 0
    (agent.memory_dir / "user_risk_view.md").unlink()
    report = sync(agent, store, today=TODAY)
    assert report.removed == ["memory/user_risk_view.md"]
    assert "memory/user_risk_view.md" not in mirror(store, agent)
    assert all(h.path != "memory/user_risk_view.md" for h in search(agent, store, "risk view", today=TODAY))


def test_superseded_and_expired_notes_are_marked_and_left_out_of_search(agent: Agent, store: SQLiteMemoryStore) -> None:
    agent.create_notes([draft("rent_budget", description="rent budget is 1500"),
                        draft("rent_budget_2026", description="rent budget is 1800"),
                        draft("rent_promo", description="rent promo ends", expires_at=dt.date(2026, 6, 1))], today=TODAY)
    agent.supersede("feedback_rent_budget.md", "feedback_rent_budget_2026.md", today=TODAY)
    sync(agent, store, today=TODAY)
    paths = [h.path for h in search(agent, store, "rent budget", today=TODAY)]
    assert "memory/feedback_rent_budget_2026.md" in paths and "memory/feedback_rent_budget.md" not in paths
    with_old = {h.path: h.status for h in search(agent, store, "rent budget", include_superseded=True, today=TODAY)}
    assert with_old["memory/feedback_rent_budget.md"] == "superseded"
    later = dt.date(2026, 7, 1)
    assert all(h.path != "memory/feedback_rent_promo.md" for h in search(agent, store, "rent promo", today=later))
    report = sync(agent, store, today=later)
    assert report.marked == ["memory/feedback_rent_promo.md"]
    assert mirror(store, agent)["memory/feedback_rent_promo.md"][1]["status"] == "expired"


def test_search_by_type_and_wiki_pages(agent: Agent, store: SQLiteMemoryStore) -> None:
    from atomic_agents.vault import WikiDraft

    agent.create_notes([draft("debt_order"), draft("debt_cap", type="decision")], today=TODAY)
    agent.new_wiki_page(WikiDraft(topic="debt_methods", name="Debt methods", description="debt snowball and avalanche",
                                  sources=["raw/book.md"], confidence="high", body="Methods.\n"), today=TODAY)
    sync(agent, store, today=TODAY)
    assert {h.path for h in search(agent, store, "debt", type="decision", today=TODAY)} == {"memory/decision_debt_cap.md"}
    hits = search(agent, store, "debt snowball avalanche", type="wiki_page", today=TODAY)
    assert [(h.path, h.name, h.hook) for h in hits] == [("wiki/debt_methods.md", "Debt methods", "debt snowball and avalanche")]


def test_rebuilt_mirror_equals_the_incremental_one(agent: Agent, store: SQLiteMemoryStore, tmp_path: Path) -> None:
    agent.create_notes([draft(f"topic_{i}") for i in range(20)], today=TODAY)
    sync(agent, store, today=TODAY)
    agent.update("feedback_topic_3.md", body="New body.\n", today=TODAY)
    agent.supersede("feedback_topic_4.md", "feedback_topic_5.md", today=TODAY)
    (agent.memory_dir / "feedback_topic_6.md").unlink()
    sync(agent, store, today=TODAY)
    incremental = mirror(store, agent)
    sync(agent, store, rebuild=True, today=TODAY)
    assert mirror(store, agent) == incremental
    fresh = SQLiteMemoryStore(tmp_path / "fresh.db", embedder=HashingEmbedder(), durable=False)
    try:
        sync(agent, fresh, today=TODAY)  # from the files alone, into an empty store
        assert mirror(fresh, agent) == incremental
    finally:
        fresh.close()


def test_write_hook_keeps_the_mirror_current_in_the_same_operation(agents_root: Path, store: SQLiteMemoryStore) -> None:
    vault = Vault(agents_root, write_hooks=[MirrorHook(store, today=lambda: TODAY)])
    agent, _ = vault.init_agent("finance")
    agent.new_note(draft("debt_order", description="avalanche order of debts"), today=TODAY)
    assert [h.path for h in search(agent, store, "avalanche debts", today=TODAY)] == ["memory/feedback_debt_order.md"]
    agent.update("feedback_debt_order.md", {"description": "snowball order of debts"}, today=TODAY)
    assert "snowball" in mirror(store, agent)["memory/feedback_debt_order.md"][0]
    agent.new_note(draft("debt_order_v2"), today=TODAY)
    agent.supersede("feedback_debt_order.md", "feedback_debt_order_v2.md", today=TODAY)
    assert mirror(store, agent)["memory/feedback_debt_order.md"][1]["status"] == "superseded"
    report = sync(agent, store, today=TODAY)
    assert report.unchanged == 2 and not (report.added or report.updated or report.removed)


class BrokenStore(InMemoryMemoryStore):
    def remember(self, *args: Any, **kwargs: Any) -> str:
        raise OSError(28, "No space left on device")


def test_a_failing_store_never_loses_or_blocks_the_write_and_lint_reports_it(agents_root: Path) -> None:
    broken = BrokenStore(embedder=HashingEmbedder())
    vault = Vault(agents_root, write_hooks=[MirrorHook(broken)])
    agent, _ = vault.init_agent("finance")
    note = agent.new_note(draft("debt_order"), today=TODAY)
    assert note.path.is_file() and "Note debt_order" in (agent.memory_dir / "INDEX.md").read_text()
    marker = agent.path / ".mirror-stale"
    assert json.loads(marker.read_text())["files"] == ["memory/feedback_debt_order.md"]
    assert any(i.rule == "mirror-stale" for i in lint_agent(agent, today=TODAY).issues)
    good = InMemoryMemoryStore(embedder=HashingEmbedder())
    assert sync(agent, good, today=TODAY).added == ["memory/feedback_debt_order.md"]
    assert not marker.exists()
    assert not any(i.rule == "mirror-stale" for i in lint_agent(agent, today=TODAY).issues)


def test_a_note_the_store_refuses_is_skipped_by_path_never_echoed(agent: Agent, store: SQLiteMemoryStore) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    agent.create_notes([draft("token_note", body=f"The token is {secret}\n"), draft("plain_note")], today=TODAY)
    report = sync(agent, store, today=TODAY)
    assert report.added == ["memory/feedback_plain_note.md"]
    assert [s["path"] for s in report.skipped] == ["memory/feedback_token_note.md"]
    assert secret not in json.dumps(report.to_dict())


def test_journal_captures_link_to_notes_that_are_recallable(agents_root: Path, store: SQLiteMemoryStore) -> None:
    vault = Vault(agents_root, write_hooks=[MirrorHook(store, today=lambda: TODAY)])
    agent, _ = vault.init_agent("finance")
    append_journal(agent, day=TODAY, decisions=["Pay the credit card before the car loan"])
    note = promote_journal_item(agent, TODAY, 1, type="decision", topic="card_before_car")
    journal = (agent.journal_dir / "2026-05" / "2026-05-06.md").read_text()
    assert f"[{note.filename}](../../memory/{note.filename})" in journal.split("## Captured to memory")[1]
    hits = search(agent, store, "credit card car loan", today=TODAY)
    assert hits and hits[0].path == f"memory/{note.filename}"


def test_other_memories_of_the_agent_are_not_touched(agent: Agent, store: SQLiteMemoryStore) -> None:
    from atomic_agents.memory import Scope

    own = store.remember("a memory written by the agent itself", {"goal_id": "g1"}, Scope.resolve("finance", "vault"))
    agent.new_note(draft("debt_order"), today=TODAY)
    sync(agent, store, rebuild=True, today=TODAY)
    assert store.get(own).content == "a memory written by the agent itself"


@pytest.mark.parametrize("rebuild", [False, True])
def test_real_model_mirror_recalls_a_paraphrase(agent: Agent, tmp_path: Path, rebuild: bool) -> None:
    from atomic_agents.memory import MiniLMEmbedder

    real = SQLiteMemoryStore(tmp_path / "real.db", embedder=MiniLMEmbedder(), durable=False)
    try:
        agent.create_notes([
            draft("debt_order", name="Debt payoff order", description="Pay the highest-interest debt first"),
            draft("gym_routine", type="user", name="Gym routine", description="Trains on Monday and Thursday mornings"),
        ], today=TODAY)
        sync(agent, real, rebuild=rebuild, today=TODAY)
        hits = search(agent, real, "which loan should I repay before the others?", today=TODAY)
        assert hits[0].path == "memory/feedback_debt_order.md"
        # Calibrated scores (issue 8): hybrid scores a paraphrase that shares no word with the note as
        # the chance that such a top hit is right on the labelled set: ~0.4 here, under ATP's 0.45.
        assert all(h.score < hits[0].score for h in hits[1:]) and hits[0].score > 0.3
    finally:
        real.close()


def test_sync_holds_the_write_lock_so_a_write_never_lands_under_a_stale_mirror(
        agents_root: Path, store: SQLiteMemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A vault write racing a sync: the write waits for the sync, and its hook has the last word."""
    import threading

    from atomic_agents.bridge import _mirror

    agent, _ = Vault(agents_root).init_agent("finance")
    agent.new_note(draft("debt_order", description="avalanche order"), today=TODAY)
    (agent.memory_dir / "feedback_debt_order.md").write_text(  # a hand edit the sync must mirror
        (agent.memory_dir / "feedback_debt_order.md").read_text().replace("avalanche order", "hand edited order"))
    writer_store = SQLiteMemoryStore(store.path, embedder=HashingEmbedder(), durable=False)
    writer = Vault(agents_root, write_hooks=[MirrorHook(writer_store, today=lambda: TODAY)]).agent("finance")
    done = threading.Event()

    def write() -> None:
        writer.update("feedback_debt_order.md", {"description": "snowball order"}, today=TODAY)
        done.set()

    real_parse = _mirror._parse_unit
    thread = threading.Thread(target=write)
    landed_during_sync: list[bool] = []

    def parse_then_race(path: Path, unit_type: str, data: bytes) -> Any:
        note = real_parse(path, unit_type, data)  # the sync has read the hand-edited bytes
        if not thread.is_alive() and not done.is_set():
            thread.start()
            landed_during_sync.append(done.wait(1.0))  # without the lock the write (and its hook) lands now
        return note

    monkeypatch.setattr(_mirror, "_parse_unit", parse_then_race)
    try:
        sync(agent, store, today=TODAY)
        thread.join(10)
        assert landed_during_sync == [False] and done.is_set()
        monkeypatch.setattr(_mirror, "_parse_unit", real_parse)
        content, _ = mirror(store, agent)["memory/feedback_debt_order.md"]
        assert "snowball order" in content  # the mirror holds the file as it is now
        again = sync(agent, store, today=TODAY)
        assert (again.updated, again.added, again.removed, again.unchanged) == ([], [], [], 1)
    finally:
        writer_store.close()


def mirror_findings(agent: Agent, store: MemoryStore, today: dt.date = TODAY) -> dict[str, str]:
    """path -> rule of every mirror finding lint reports for the agent."""
    issues = lint_agent(agent, today=today, store=store).issues
    return {str(i.path): i.rule for i in issues if i.rule.startswith("mirror-")}


def test_lint_reports_hand_edits_deletes_and_adds_by_path_until_the_next_sync(agent: Agent, store: SQLiteMemoryStore,
                                                                               embedder: CountingEmbedder) -> None:
    agent.create_notes([draft("debt_order"), draft("risk_view", type="user"), draft("gym_days", type="user")], today=TODAY)
    assert mirror_findings(agent, store) == {}  # never synced: no mirror to lag
    sync(agent, store, today=TODAY)
    assert mirror_findings(agent, store) == {}
    edited = agent.memory_dir / "feedback_debt_order.md"
    edited.write_text(edited.read_text().replace("Body of debt_order.", "Avalanche, by hand."))  # an editor, not the API
    (agent.memory_dir / "user_risk_view.md").unlink()
    write_raw_notes(agent, 1)
    embedder.texts = 0
    found = mirror_findings(agent, store)
    assert found == {"finance/memory/feedback_debt_order.md": "mirror-stale",
                     "finance/memory/user_risk_view.md": "mirror-orphan",
                     "finance/memory/reference_topic_00000.md": "mirror-missing"}
    assert embedder.texts == 0  # the check embeds nothing
    report = lint_agent(agent, today=TODAY, store=store)
    assert all(i.severity == "warning" and "vault sync finance" in i.message for i in report.issues
               if i.rule.startswith("mirror-"))
    sync(agent, store, today=TODAY)
    assert mirror_findings(agent, store) == {}
    assert mirror_findings(agent, store, TODAY + dt.timedelta(days=1)) == {}


def test_lint_reports_a_note_expired_since_the_last_sync(agent: Agent, store: SQLiteMemoryStore) -> None:
    agent.new_note(draft("promo_rate", type="project", expires_at=TODAY + dt.timedelta(days=3)), today=TODAY)
    sync(agent, store, today=TODAY)
    later = TODAY + dt.timedelta(days=10)
    assert mirror_findings(agent, store, later) == {"finance/memory/project_promo_rate.md": "mirror-stale"}
    sync(agent, store, today=later)
    assert mirror_findings(agent, store, later) == {}


def test_cli_lint_checks_the_mirror_when_a_store_is_configured(agents_root: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from atomic_agents.cli import main

    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")

    def run(*args: str) -> tuple[int, Any]:
        with pytest.raises(SystemExit) as exc:
            main(["--agents-root", str(agents_root), *args, "--json"])
        return int(exc.value.code or 0), json.loads(capsys.readouterr().out)

    def rules() -> dict[str, str]:
        code, data = run("vault", "lint", "fin")
        assert code == 0
        return {i["path"]: i["rule"] for i in data["reports"][0]["issues"] if i["rule"].startswith("mirror-")}

    run("vault", "init", "fin")
    (agents_root / "_memory").mkdir()
    run("vault", "new", "fin", "--type", "decision", "--topic", "budget_cap", "--name", "Budget cap",
        "--description", "Spend at most 2000 a month", "--source", "x")
    run("vault", "sync", "fin")
    assert rules() == {}
    note = agents_root / "fin" / "memory" / "decision_budget_cap.md"
    note.write_text(note.read_text() + "\nRaised to 2500 by hand.\n")
    assert rules() == {"fin/memory/decision_budget_cap.md": "mirror-stale"}
    run("vault", "sync", "fin")
    assert rules() == {}


def test_search_still_fills_its_limit_when_many_notes_expired_since_the_last_sync(agent: Agent,
                                                                                   store: SQLiteMemoryStore) -> None:
    soon = TODAY + dt.timedelta(days=1)
    agent.create_notes([draft(f"budget_rule_{i}", type="project", expires_at=soon, description="Budget rule that expires")
                        for i in range(15)] + [draft("budget_keeper", description="Budget rule that stays")], today=TODAY)
    sync(agent, store, today=TODAY)
    later = TODAY + dt.timedelta(days=5)  # all 15 expired, the mirror not synced since
    hits = search(agent, store, "budget rule", limit=1, today=later)
    assert [h.path for h in hits] == ["memory/feedback_budget_keeper.md"]
    assert len(search(agent, store, "budget rule", limit=20, include_superseded=True, today=later)) == 16

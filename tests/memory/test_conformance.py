"""The behaviour every MemoryStore backend must show (run on each factory in conftest.BACKENDS)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from atomic_agents.exceptions import EmbedderMismatchError, NotFoundError, SecretRejectedError, ValidationError
from atomic_agents.memory import MAX_CONTENT_CHARS, RELEVANCE_FLOOR, MemoryStore, Scope, ScopeFilter, export_jsonl, import_jsonl

from ._helpers import CountingEmbedder


def test_remember_returns_id_and_get_reads_it_back(store: MemoryStore, scope: Scope) -> None:
    mid = store.remember("Billing deploy went green", {"goal_id": "g1", "n": 3}, scope)
    mem = store.get(mid)
    assert (mem.content, mem.metadata["goal_id"], mem.metadata["n"]) == ("Billing deploy went green", "g1", 3)
    assert (mem.agent_id, mem.user_id, mem.org_id, mem.workspace_id) == ("builder", "alice", "acme", "acme/web")
    assert "stored_at" in mem.metadata and mem.expires_at is None and mem.deleted_at is None


def test_org_and_workspace_default_from_eden_environment(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDEN_ORG_ID", "org-from-env")
    monkeypatch.setenv("EDEN_WORKSPACE_ID", "team/repo")
    mem = store.get(store.remember("hello there", None, Scope("a", "u")))
    assert (mem.org_id, mem.workspace_id) == ("org-from-env", "team/repo")


@pytest.mark.parametrize(
    "other",
    [
        Scope("researcher", "alice", org_id="acme", workspace_id="acme/web"),
        Scope("builder", "bob", org_id="acme", workspace_id="acme/web"),
        Scope("builder", "alice", org_id="other", workspace_id="acme/web"),
        Scope("builder", "alice", org_id="acme", workspace_id="acme/api"),
    ],
)
def test_reads_never_cross_scopes(store: MemoryStore, scope: Scope, other: Scope) -> None:
    store.remember("the billing deploy failed", {"goal_id": "g1"}, scope)
    assert store.search("billing deploy", other) == []
    assert store.recall("billing deploy", other) == []
    assert store.search_hybrid("billing deploy", other) == []
    assert store.list_memories(other, {"goal_id": "g1"}) == []


def test_keyword_search_matches_any_word_and_ranks_more_matches_first(store: MemoryStore, scope: Scope) -> None:
    a = store.remember("database migration timed out during the billing deploy", None, scope)
    b = store.remember("the cat sleeps on the sofa", None, scope)
    store.remember("quarterly planning notes", None, scope)
    # ATP's status command passes eight words at once and wants records matching any of them.
    hits = store.search("billing deploy migration sofa alpha beta gamma delta", scope)
    assert [h.id for h in hits] == [a, b]
    # calibrated, not "best hit = 1": matching three or one of eight words is a weak match
    assert 0.0 < hits[1].score < hits[0].score < RELEVANCE_FLOOR
    full = store.search("billing deploy migration", scope)
    assert full[0].id == a and full[0].score >= RELEVANCE_FLOOR


def test_a_memory_keyword_score_does_not_depend_on_the_other_candidates(store: MemoryStore, scope: Scope) -> None:
    """BM25 over the whole index (N, row counts, average length), as FTS5 computes it, not over the result pool."""
    long = store.remember("billing " + "unrelated filler words here " * 6, {"k": "long"}, scope)
    store.remember_many([("deploy billing", {"k": "short"}), ("deploy the cache", {"k": "short"})], scope)
    query = "deploy billing"
    alone = store.search(query, scope, 10, filters={"k": "long"})
    among = {h.id: h.score for h in store.search(query, scope, 10)}
    assert [h.id for h in alone] == [long] and 0.0 < alone[0].score < RELEVANCE_FLOOR  # one word, diluted
    assert alone[0].score == pytest.approx(among[long], rel=1e-12)
    assert store.search(query, scope, 1, filters={"k": "long"})[0].score == alone[0].score


def test_keyword_search_treats_operators_as_words(store: MemoryStore, scope: Scope) -> None:
    mid = store.remember("NEAR the AND gate", None, scope)
    assert [h.id for h in store.search('"NEAR" AND -gate*', scope)] == [mid]


def test_semantic_recall_ranks_the_closest_memory_first(store: MemoryStore, scope: Scope) -> None:
    want = store.remember("billing deploy failed after the database migration", None, scope)
    store.remember("the cat sleeps on the sofa all afternoon", None, scope)
    hits = store.recall("billing deploy failed", scope, limit=2)
    assert hits[0].id == want
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits[0].score > hits[-1].score


def test_hybrid_keeps_a_keyword_hit_above_the_relevance_floor(store: MemoryStore, scope: Scope) -> None:
    # One shared rare word: weak for the embedder, a clear keyword hit.
    mid = store.remember("Zanzibar runbook: restart workers, drain queue, rotate logs, page oncall", None, scope)
    for i in range(5):
        store.remember(f"unrelated note number {i} about lunch menus", None, scope)
    hits = store.search_hybrid("zanzibar", scope)
    assert hits[0].id == mid and hits[0].score >= RELEVANCE_FLOOR


def test_a_snake_case_word_matches_its_words_in_a_row_only(store: MemoryStore, scope: Scope) -> None:
    # FTS5 reads parse_config as the phrase "pars config": a memory holding only "parse", or both
    # words apart, does not match, and coverage counts the word held only where the phrase is
    ident = store.remember("parse_config failed at startup on the staging box", None, scope)
    store.remember("parse the json payload before saving", None, scope)
    store.remember("parse the settings, then config reload", None, scope)
    for i in range(4):
        store.remember(f"unrelated note number {i} about lunch menus", None, scope)
    assert [h.id for h in store.search("parse_config", scope)] == [ident]
    hits = store.search("parse_config startup", scope)
    assert [h.id for h in hits] == [ident] and hits[0].score >= RELEVANCE_FLOOR


def test_hybrid_ranks_a_memory_holding_every_query_word_above_one_repeating_one(store: MemoryStore, scope: Scope) -> None:
    # BM25 saturates per word, so repeating the rarer query word in a short memory earns about as
    # much evidence as holding both words once; keyword coverage (the share of the query's IDF
    # mass held) tells them apart.
    repeats = store.remember("Zanzibar. Zanzibar, zanzibar!", None, scope)
    both = store.remember("The zanzibar runbook covers log rotation and restarts for the billing workers", None, scope)
    for i in range(2):
        store.remember(f"the workers' canteen menu, week {i}", None, scope)
    for i in range(5):
        store.remember(f"unrelated note number {i} about lunch menus and office plants", None, scope)
    hits = store.search_hybrid("zanzibar workers", scope, limit=3)
    assert [h.id for h in hits[:2]] == [both, repeats]
    assert hits[0].score >= hits[1].score


def test_metadata_filters_are_exact_equality_on_top_level_keys(store: MemoryStore, scope: Scope) -> None:
    g1 = [store.remember(f"record {i} of goal one", {"goal_id": "g1", "stage": "action", "n": i}, scope) for i in range(3)]
    store.remember("record of goal two", {"goal_id": "g2", "stage": "action"}, scope)
    store.remember("goal one but flag", {"goal_id": "g1", "flag": True}, scope)
    listed = store.list_memories(scope, {"goal_id": "g1", "stage": "action"})
    assert [m.id for m in listed] == g1  # oldest first
    assert [m.id for m in store.list_memories(scope, {"n": 1})] == [g1[1]]
    assert store.list_memories(scope, {"n": "1"}) == []  # type-strict
    assert len(store.list_memories(scope, {"flag": True})) == 1 and store.list_memories(scope, {"flag": 1}) == []
    sem = store.search_semantic("record of goal", scope, {"goal_id": "g2"}, limit=5)
    assert [h.metadata["goal_id"] for h in sem] == ["g2"]


def test_recall_search_and_hybrid_take_exact_metadata_filters(store: MemoryStore, scope: Scope) -> None:
    want = {store.remember(f"billing deploy note {i}", {"goal_id": "g1", "n": i}, scope) for i in range(3)}
    store.remember("billing deploy note for another goal", {"goal_id": "g2", "n": 1}, scope)
    store.remember("billing deploy note with a list", {"goal_id": "g1", "tags": ["a"]}, scope)
    store.remember("billing deploy note typed differently", {"goal_id": "g1", "n": "1"}, scope)
    for name, call in (
        ("recall", lambda f: store.recall("billing deploy", scope, 10, filters=f)),
        ("search", lambda f: store.search("billing deploy", scope, 10, filters=f)),
        ("search_hybrid", lambda f: store.search_hybrid("billing deploy", scope, f, 10)),
    ):
        got = call({"goal_id": "g1", "n": 1})
        assert [(h.metadata["goal_id"], h.metadata["n"]) for h in got] == [("g1", 1)], name
        assert {h.id for h in call({"goal_id": "g1"})} >= want, name
        assert all(h.metadata["goal_id"] == "g1" for h in call({"goal_id": "g1"})), name
        assert call({"goal_id": "nope"}) == [], name
        assert [h.metadata["tags"] for h in call({"tags": ["a"]})] == [["a"]], name


def test_hybrid_brings_the_reply_after_the_turn_a_question_matches(store: MemoryStore, scope: Scope) -> None:
    # The answer is in the reply, which shares no word with the question; it follows the matching
    # turn in the scope's timeline, whatever another scope or a forgotten memory wrote in between.
    other = Scope("researcher", "alice", org_id="acme", workspace_id="acme/web")
    for i in range(6):
        store.remember(f"Ann: small talk number {i} about rain, gardens and trains", {"part": "chat"}, scope)
    asked = store.remember("Ann: Who played the music at your wedding in June?", {"part": "chat"}, scope)
    store.remember("a note of another agent written in between", None, other)
    store.forget(store.remember("Bo: (typing)", {"part": "chat"}, scope))
    reply = store.remember("Bo: It was Jan Kowal, he was incredible!", {"part": "chat"}, scope)
    for i in range(6):
        store.remember(f"Bo: more small talk number {i} about cats and coffee", {"part": "chat"}, scope)
    hits = store.search_hybrid("Who played the music at the wedding in June?", scope, limit=3)
    assert [h.id for h in hits[:2]] == [asked, reply]
    assert hits[0].score >= hits[1].score
    # a turn that asks nothing gives its successor nothing (the answer follows a question)
    said = store.remember("Ann: The music at the wedding in June was played by a band.", {"part": "chat"}, scope)
    after = store.remember("Bo: Cats and coffee, number 9", {"part": "chat"}, scope)
    hits = store.search_hybrid("Who played the music at the wedding in June?", scope, limit=20)
    ids = [h.id for h in hits]
    assert {asked, said, reply} == set(ids[:3])
    assert after not in ids[:5]
    # the reply is a candidate only where the filters admit it
    store.edit(reply, metadata={"part": "other"})
    assert reply not in {h.id for h in store.search_hybrid("Who played the music at the wedding in June?", scope, {"part": "chat"}, 5)}


def test_edit_reembeds_changed_content_only(make_store: Any, scope: Scope) -> None:
    emb = CountingEmbedder()
    store = make_store(emb)
    mid = store.remember("the cat sleeps on the sofa", {"k": 1}, scope)
    before = len(emb.calls)
    edited = store.edit(mid, metadata={"k": 2})
    assert edited.metadata["k"] == 2 and "stored_at" in edited.metadata
    assert len(emb.calls) == before  # unchanged content is never re-embedded
    store.edit(mid, content="quarterly billing report is ready")
    assert emb.calls[-1] == "quarterly billing report is ready"
    assert store.recall("quarterly billing report", scope, 1)[0].id == mid
    assert store.search("sofa", scope) == []
    assert store.get(mid).content == "quarterly billing report is ready"


def test_identical_content_is_embedded_once(make_store: Any, scope: Scope) -> None:
    emb = CountingEmbedder()
    store = make_store(emb)
    store.remember("same words here", None, scope)
    store.remember("same words here", {"again": True}, scope)
    assert emb.calls.count("same words here") == 1


def test_forget_hides_from_every_read(store: MemoryStore, scope: Scope) -> None:
    mid = store.remember("billing deploy failed", {"goal_id": "g1"}, scope)
    assert store.forget(mid).deleted_at is not None
    with pytest.raises(NotFoundError) as info:
        store.get(mid)
    assert info.value.record == mid
    assert store.search("billing", scope) == [] and store.recall("billing", scope) == []
    assert store.list_memories(scope, {"goal_id": "g1"}) == []
    with pytest.raises(NotFoundError):
        store.forget(mid)
    assert store.health().deleted == 1


def test_expired_memories_are_invisible_until_forget_expired(store: MemoryStore, scope: Scope) -> None:
    short = store.remember("temporary billing note", None, scope, ttl_ms=1)
    keep = store.remember("durable billing note", None, scope)
    time.sleep(0.02)
    assert [h.id for h in store.search("billing", scope)] == [keep]
    assert [h.id for h in store.recall("billing note", scope)] == [keep]
    with pytest.raises(NotFoundError):
        store.get(short)
    health = store.health()
    assert (health.total, health.expired) == (2, 1)  # still stored until clean-up
    assert store.forget_expired(ScopeFilter(agent_id="someone-else")) == 0
    assert store.forget_expired(scope.as_filter()) == 1
    assert store.health().expired == 0


def test_edit_can_set_and_clear_a_ttl(store: MemoryStore, scope: Scope) -> None:
    mid = store.remember("billing note", None, scope)
    assert store.edit(mid, ttl_ms=60_000).expires_at is not None
    assert store.edit(mid, ttl_ms=None).expires_at is None
    assert store.get(mid).expires_at is None


def test_prune_is_a_dry_run_by_default_and_needs_a_target(store: MemoryStore, scope: Scope) -> None:
    ids = [store.remember(f"scratch note {i}", None, scope) for i in range(3)]
    keep = store.remember("important decision", None, scope)
    report = store.prune(scope.as_filter(), keywords="scratch")
    assert (report.dry_run, report.matched, report.removed) == (True, 3, 0)
    assert set(report.sample_ids) == set(ids) and len(store.search("scratch", scope)) == 3
    with pytest.raises(ValidationError):
        store.prune()
    done = store.prune(scope.as_filter(), keywords="scratch", dry_run=False)
    assert done.removed == 3 and store.search("scratch", scope) == []
    assert store.health().total == 4  # soft: rows stay
    hard = store.prune(scope.as_filter(), keywords="scratch", dry_run=False, hard=True)
    assert hard.removed == 3 and store.health().total == 1
    assert store.get(keep).content == "important decision"


def test_prune_expired_only(store: MemoryStore, scope: Scope) -> None:
    store.remember("old note", None, scope, ttl_ms=1)
    store.remember("new note", None, scope)
    time.sleep(0.02)
    report = store.prune(expired_only=True, dry_run=False, hard=True)
    assert report.removed == 1 and store.health().total == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"content": 42}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * (MAX_CONTENT_CHARS + 1)}, "content"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"metadata": {"bad": {1, 2}}}, "metadata"),
        ({"ttl_ms": 0}, "ttl_ms"),
        ({"ttl_ms": "10"}, "ttl_ms"),
        ({"scope": ("builder", "alice")}, "scope"),
    ],
)
def test_bad_input_is_refused_with_a_typed_error(store: MemoryStore, scope: Scope, kwargs: dict[str, Any], field: str) -> None:
    args = {"content": "fine content", "metadata": None, "scope": scope, "ttl_ms": None, **kwargs}
    with pytest.raises(ValidationError) as info:
        store.remember(args["content"], args["metadata"], args["scope"], ttl_ms=args["ttl_ms"])
    assert info.value.field == field
    assert store.health().total == 0


def test_scope_ids_are_required() -> None:
    with pytest.raises(ValidationError) as info:
        Scope("builder", None)  # type: ignore[arg-type]
    assert info.value.field == "user_id"
    with pytest.raises(ValidationError):
        Scope("", "alice")


@pytest.mark.parametrize("limit", [0, -1, 10_001, "5", True])
def test_absurd_limits_are_refused(store: MemoryStore, scope: Scope, limit: Any) -> None:
    with pytest.raises(ValidationError) as info:
        store.search("anything", scope, limit)
    assert info.value.field == "limit"


def test_remember_many_writes_all_or_nothing(store: MemoryStore, scope: Scope) -> None:
    with pytest.raises(SecretRejectedError):
        store.remember_many([("fine one", None), ("AKIAIOSFODNN7EXAMPLE in a note", None)], scope)
    assert store.health().total == 0
    ids = store.remember_many([("first", None), ("second", {"k": 1})], scope)
    assert [store.get(i).content for i in ids] == ["first", "second"]


def test_secrets_are_refused_without_echoing_them(store: MemoryStore, scope: Scope) -> None:
    secret = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
    with pytest.raises(SecretRejectedError) as info:
        store.remember(f"use token {secret} for the deploy", None, scope)
    assert info.value.pattern == "github-token" and secret not in str(info.value)
    with pytest.raises(SecretRejectedError) as meta_info:
        store.remember("deploy notes", {"env": {"password": "hunter2hunter2"}}, scope)
    assert meta_info.value.field == "metadata.env.password" and "hunter2" not in str(meta_info.value)
    mid = store.remember("deploy notes", None, scope)
    with pytest.raises(SecretRejectedError):
        store.edit(mid, content="password = s3cr3tvalue!")
    assert store.get(mid).content == "deploy notes" and store.health().total == 1


def test_health_reports_counts_and_embedder(store: MemoryStore, scope: Scope) -> None:
    store.remember("one", None, scope)
    store.forget(store.remember("two", None, scope))
    h = store.health()
    assert (h.status, h.total, h.live, h.deleted) == ("ok", 2, 1, 1)
    assert h.embedder == store.embedder.model_id and h.dimension == store.embedder.dimension
    assert h.needs_reindex is False and h.schema_version >= 1
    assert store.vacuum()["status"] == "ok"


def test_export_import_round_trip_across_backends(store: MemoryStore, scope: Scope, tmp_path: Any) -> None:
    from atomic_agents.memory import InMemoryMemoryStore, SQLiteMemoryStore

    live = store.remember("billing deploy went green", {"goal_id": "g1"}, scope)
    gone = store.remember("forgotten note", None, scope)
    store.forget(gone)
    path = tmp_path / "backup.jsonl"
    assert export_jsonl(store, path) == 2
    for other in (InMemoryMemoryStore(embedder=CountingEmbedder()), SQLiteMemoryStore(tmp_path / "other.db", embedder=CountingEmbedder())):
        assert import_jsonl(other, path) == (2, 0)
        assert import_jsonl(other, path) == (0, 2)  # idempotent: ids already present are skipped
        got = other.get(live)
        assert (got.content, got.metadata, got.created_at) == ("billing deploy went green", store.get(live).metadata, store.get(live).created_at)
        assert other.recall("billing deploy", scope, 1)[0].id == live
        with pytest.raises(NotFoundError):
            other.get(gone)
        other.close()


def test_import_refuses_a_bad_file_before_writing(store: MemoryStore, tmp_path: Any) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "00000000-0000-4000-8000-000000000001", "content": "ok", "agent_id": "a", "user_id": "u", "org_id": "o", "workspace_id": "w", "created_at": 1}\nnot json\n')
    with pytest.raises(ValidationError) as info:
        import_jsonl(store, path)
    assert "line 2" in info.value.message and store.health().total == 0


def test_semantic_search_refuses_another_embedder_until_reindex(make_store: Any, scope: Scope) -> None:
    store = make_store(CountingEmbedder(256))
    if not store.persistent:
        pytest.skip("reopening with another model needs a persistent backend")
    mid = store.remember("billing deploy failed", None, scope)
    store.close()
    other = make_store(CountingEmbedder(128))
    with pytest.raises(EmbedderMismatchError) as info:
        other.recall("billing", scope)
    assert (info.value.stored, info.value.current) == ("hashing-fake-256", "hashing-fake-128")
    assert other.search("billing", scope)[0].id == mid  # keyword search needs no vectors
    assert other.health().needs_reindex
    seen: list[tuple[int, int]] = []
    assert other.reindex(progress=lambda n, total: seen.append((n, total))) == 1
    assert seen == [(1, 1)]
    assert other.recall("billing deploy", scope)[0].id == mid and not other.health().needs_reindex


def test_a_secret_metadata_key_is_never_echoed(store: MemoryStore, scope: Scope) -> None:
    token = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
    for meta in ({token: "x"}, {"env": {token: 1}}, {"list": [{token: None}]}):
        with pytest.raises(SecretRejectedError) as info:
            store.remember("deploy notes", meta, scope)
        assert token not in str(info.value) and token not in repr(info.value) and token not in str(info.value.to_dict())
    with pytest.raises(SecretRejectedError) as scoped:
        store.remember("deploy notes", None, Scope("builder", "alice", org_id="acme", workspace_id=f"acme/{token}"))
    assert scoped.value.field == "workspace_id" and token not in str(scoped.value)
    assert store.health().total == 0


def test_null_metadata_values_are_stored_returned_and_filterable(store: MemoryStore, scope: Scope) -> None:
    a = store.remember("release notes for the billing service", {"reviewer": None, "goal_id": "g1"}, scope)
    b = store.remember("release notes for the search service", {"reviewer": "", "goal_id": "g1"}, scope)
    c = store.remember("release notes for the web service", {"reviewer": "bob", "goal_id": "g1"}, scope)
    assert store.get(a).metadata["reviewer"] is None
    assert [m.id for m in store.list_memories(scope, {"reviewer": None})] == [a]
    assert [m.id for m in store.list_memories(scope, {"reviewer": ""})] == [b]
    assert [h.id for h in store.search_semantic("release notes", scope, {"reviewer": None})] == [a]
    assert [h.id for h in store.search_hybrid("release notes", scope, {"reviewer": None, "goal_id": "g1"})] == [a]
    edited = store.edit(c, metadata={"reviewer": None, "goal_id": "g1", "nested": {"x": None}})
    assert edited.metadata["nested"] == {"x": None}
    assert sorted(m.id for m in store.list_memories(scope, {"reviewer": None})) == sorted([a, c])


def _export_lines(n: int, scope: Scope) -> list[dict[str, Any]]:
    import uuid

    return [
        {"id": str(uuid.uuid4()), "content": f"imported note {i}", "metadata": {"i": i}, "agent_id": scope.agent_id,
         "user_id": scope.user_id, "org_id": scope.org_id, "workspace_id": scope.workspace_id,
         "created_at": 1.7e9 + i, "updated_at": 1.7e9 + i, "expires_at": None, "deleted_at": None}
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("created_at", float("inf")), ("created_at", float("nan")), ("created_at", -1.0), ("created_at", "1700000000"),
        ("created_at", True), ("created_at", None), ("updated_at", float("-inf")), ("expires_at", float("nan")),
        ("deleted_at", -5), ("expires_at", 10**400), ("metadata", ["a"]), ("content", 42), ("id", 7), ("agent_id", ""),
        ("metadata", {"password": "hunter2"}), ("content", "token ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"),
        ("user_id", "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ],
)  # fmt: skip
def test_import_is_all_or_nothing_and_names_the_bad_line(
    store: MemoryStore, scope: Scope, tmp_path: Any, field: str, bad: Any
) -> None:
    import json

    records = _export_lines(601, scope)
    good = records[600][field]
    records[600][field] = bad
    path = tmp_path / "backup.jsonl"
    # json.dumps writes NaN/Infinity, which Python's json (like eden's exports) reads back
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        import_jsonl(store, path)
    assert ":601" in str(info.value) or "line 601" in str(info.value)
    assert info.value.field is not None and info.value.field.startswith(field)
    assert store.health().total == 0
    if isinstance(bad, str) and len(bad) > 8:
        assert bad not in str(info.value) and bad[4:] not in str(info.value.to_dict())
    records[600][field] = good
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    assert import_jsonl(store, path) == (601, 0)


def test_import_names_the_line_that_is_not_utf8(store: MemoryStore, scope: Scope, tmp_path: Any) -> None:
    import json

    lines = [json.dumps(r).encode() for r in _export_lines(400, scope)]  # well past one 8 KB read buffer
    lines[300] = lines[300].replace(b"imported note", b"caf\xe9 note")
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ValidationError) as info:
        import_jsonl(store, path)
    # The one decoding chokepoint (atomic_agents._text) names file:line.
    assert getattr(info.value, "line", None) == 301 and "latin1.jsonl:301" in str(info.value)
    assert store.health().total == 0


def _conversation(store: MemoryStore, scope: Scope) -> str:
    """A chat where the speaker's name is in every turn, and one turn about the hike."""
    hike = store.remember("Caroline: I went hiking in the hills last week and got lost near the ridge", None, scope)
    for i in range(60):
        store.remember(f"Caroline: {['Cool', 'Wow', 'Nice', 'Haha'][i % 4]}!", None, scope)
        store.remember(f"Melanie: tell me more about turn {i}", None, scope)
    return hike


def test_semantic_side_leaves_out_a_word_nearly_every_memory_holds(store: MemoryStore, scope: Scope) -> None:
    # The name is in half the store, so BM25 gives it no weight; an embedding of the whole question
    # would rank the short "Caroline: Cool!" turns first. Embedded without it, the hike comes first.
    hike = _conversation(store, scope)
    assert store.recall("When did Caroline go hiking?", scope, limit=1)[0].id == hike
    assert store.search_hybrid("When did Caroline go hiking?", scope, limit=1)[0].id == hike
    # a question of nothing but the common word keeps it: something must be embedded
    assert store.recall("Caroline?", scope, limit=3)


def test_a_word_nearly_every_memory_of_the_scope_holds_is_left_out_in_a_shared_store(store: MemoryStore, scope: Scope) -> None:
    # Four other conversations share the store, so "Caroline" is in a tenth of it (BM25's IDF for it
    # is far from small) but in half of this scope: the scope's own counts leave it out.
    for n in range(4):
        other = Scope(f"chat-{n}", "alice", org_id="acme", workspace_id="acme/web")
        store.remember_many([(f"Speaker{n}: a line about topic {i} and weather {i % 7}", None) for i in range(250)], other)
    hike = _conversation(store, scope)
    assert store.recall("When did Caroline go hiking?", scope, limit=1)[0].id == hike
    assert store.search_hybrid("When did Caroline go hiking?", scope, limit=1)[0].id == hike


def test_a_small_store_embeds_the_whole_question(store: MemoryStore, scope: Scope) -> None:
    # Fewer than UBIQUITOUS_MIN_ROWS rows: document frequencies say too little to drop a word.
    short = store.remember("Caroline: Cool!", None, scope)
    store.remember("Caroline: I went hiking in the hills last week and got lost near the ridge", None, scope)
    assert store.recall("When did Caroline go hiking?", scope, limit=1)[0].id == short


def test_hybrid_scores_a_memory_lacking_a_name_the_question_asks_about_lower(store: MemoryStore, scope: Scope) -> None:
    # The embedders and the index fold case, so a question and its lower-cased copy differ only in
    # what they name ("Grenoble"): the memory about Lyon lacks it and scores lower; a memory that
    # holds it scores the same either way. A question in another language names nothing.
    lyon = store.remember("Guest wifi in the Lyon office: the password is printed on the card at reception", None, scope)
    store.remember("unrelated note about lunch menus", None, scope)

    def top(query: str) -> tuple[str, float]:
        hits = store.search_hybrid(query, scope, limit=1)
        return hits[0].id, hits[0].score

    asked, plain = top("What is the wifi password in the Grenoble office?"), top("what is the wifi password in the grenoble office?")
    assert asked[0] == plain[0] == lyon
    assert asked[1] < plain[1]
    assert top("Wo ist das Wifi Passwort im Grenoble Office?")[1] == top("wo ist das wifi passwort im grenoble office?")[1]
    assert top("Grenoble wifi password")[1] == top("grenoble wifi password")[1]  # keywords, not a question
    gre = store.remember("Guest wifi in the Grenoble office: the password is printed on the card at reception", None, scope)
    asked, plain = top("What is the wifi password in the Grenoble office?"), top("what is the wifi password in the grenoble office?")
    assert asked[0] == plain[0] == gre
    assert asked[1] == pytest.approx(plain[1])

"""Caller-chosen ids, cross-agent scans and leases with fencing tokens, on every backend."""

from __future__ import annotations

import time
import uuid

import pytest

from atomic_agents.exceptions import ConflictError, ValidationError
from atomic_agents.memory import Fence, LeaseHeldError, MemoryStore, Scope, ScopeFilter, StaleFenceError


def test_remember_takes_a_caller_chosen_id_once(store: MemoryStore, scope: Scope) -> None:
    mid = str(uuid.uuid4())
    assert store.remember(f"Record ID: {mid}", {"goal_id": "g1"}, scope, memory_id=mid) == mid
    assert store.get(mid).content == f"Record ID: {mid}"
    with pytest.raises(ConflictError):
        store.remember("again", None, scope, memory_id=mid)
    with pytest.raises(ValidationError) as err:
        store.remember("bad id", None, scope, memory_id="not-a-uuid")
    assert err.value.field == "id"
    assert [m.content for m in store.list_memories(scope)] == [f"Record ID: {mid}"]


def test_scan_reads_across_agents_of_one_workspace_only(store: MemoryStore) -> None:
    a = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
    b = Scope("verifier", "bob", org_id="acme", workspace_id="acme/web")
    other = Scope("builder", "alice", org_id="acme", workspace_id="acme/api")
    first = store.remember("built it", {"goal_id": "g1"}, a)
    second = store.remember("checked it", {"goal_id": "g1"}, b)
    store.remember("elsewhere", {"goal_id": "g1"}, other)
    store.remember("another goal", {"goal_id": "g2"}, a)
    gone = store.remember("forgotten", {"goal_id": "g1"}, b)
    store.forget(gone)
    ws = ScopeFilter(org_id="acme", workspace_id="acme/web")
    assert [m.id for m in store.scan(ws, {"goal_id": "g1"})] == [first, second]
    assert len(store.scan(ws)) == 3
    assert len(store.scan(ScopeFilter(org_id="acme"), {"goal_id": "g1"})) == 3


def test_a_live_lease_refuses_a_second_claim_and_tokens_grow(store: MemoryStore) -> None:
    first = store.acquire_lease("goal:g1", "builder", 60_000)
    assert first.token == 1 and first.live()
    with pytest.raises(LeaseHeldError) as err:
        store.acquire_lease("goal:g1", "verifier", 60_000)
    assert err.value.lease.holder == "builder"
    released = store.release_lease("goal:g1", first.token)
    assert not released.live()
    second = store.acquire_lease("goal:g1", "verifier", 60_000)
    assert second.token == 2 and store.get_lease("goal:g1") == second
    assert store.acquire_lease("goal:g2", "builder", 60_000).token == 1  # tokens count per key
    assert {le.key for le in store.leases("goal:")} == {"goal:g1", "goal:g2"}


def test_an_expired_lease_can_be_claimed_and_its_token_is_stale(store: MemoryStore, scope: Scope) -> None:
    old = store.acquire_lease("goal:g1", "builder", 1)
    time.sleep(0.01)
    new = store.acquire_lease("goal:g1", "runtime", 60_000)
    assert new.token == old.token + 1
    with pytest.raises(StaleFenceError):
        store.remember("late write", {"goal_id": "g1"}, scope, fence=Fence("goal:g1", old.token))
    with pytest.raises(StaleFenceError):
        store.release_lease("goal:g1", old.token)
    assert store.list_memories(scope) == []
    ok = store.remember("fresh write", {"goal_id": "g1"}, scope, fence=Fence("goal:g1", new.token))
    assert store.get(ok).content == "fresh write"


def test_a_fence_on_a_released_or_unknown_key_refuses_the_write(store: MemoryStore, scope: Scope) -> None:
    lease = store.acquire_lease("goal:g1", "builder", 60_000)
    store.release_lease("goal:g1", lease.token)
    for fence in (Fence("goal:g1", lease.token), Fence("goal:never", 1)):
        with pytest.raises(StaleFenceError):
            store.remember("x", None, scope, fence=fence)
    assert store.list_memories(scope) == []


@pytest.mark.parametrize("ttl", [0, -5, 10**12, True, "30"])
def test_lease_ttl_is_checked(store: MemoryStore, ttl: object) -> None:
    with pytest.raises(ValidationError) as err:
        store.acquire_lease("goal:g1", "builder", ttl)  # type: ignore[arg-type]
    assert err.value.field == "ttl_ms"

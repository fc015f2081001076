"""Eight processes race for the same goal, 100 times: exactly one claim wins each round (SQLite, PostgreSQL)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from atomic_agents.atp import Identity, Ledger
from atomic_agents.memory import HashingEmbedder, LeaseHeldError, open_store

ROUNDS, RACERS = 100, 8


def _racer(db: str, n: int, barrier: mp.synchronize.Barrier, out: mp.Queue) -> None:  # type: ignore[type-arg]
    store = open_store(db, embedder=HashingEmbedder())
    ledger = Ledger(store, Identity("acme", "acme/web", f"builder-{n}"))
    won = []
    for r in range(ROUNDS):
        barrier.wait()
        try:
            won.append((r, ledger.claim(f"race-{r}", "builder", ttl_ms=600_000).token))
        except LeaseHeldError:
            pass
    store.close()
    out.put((n, won))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_exactly_one_winner_per_round(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else str(tmp_path / "memory.db")
    store = open_store(db, embedder=HashingEmbedder())
    ledger = Ledger(store, Identity("acme", "acme/web", "dispatcher"))
    for r in range(ROUNDS):
        ledger.start(f"race goal {r}", requester="ci", goal_id=f"race-{r}")
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(RACERS), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(db, n, barrier, out)) for n in range(RACERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    winners: dict[int, list[int]] = {}
    for n, won in results:
        for r, token in won:
            winners.setdefault(r, []).append(token)
    assert sorted(winners) == list(range(ROUNDS))  # every round had a winner
    assert all(tokens == [1] for tokens in winners.values())  # and only one, with the first token
    leases = {le.key.rsplit(":", 1)[-1]: le for le in store.leases("atp:acme:acme/web:")}
    assert len(leases) == ROUNDS and all(le.token == 1 for le in leases.values())
    store.close()

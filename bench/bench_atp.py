"""Benchmark the ATP ledger against the memory store it runs on, in the same run.

    .venv/bin/python bench/bench_atp.py                 # 1,000 and 10,000 goals of 10 records
    .venv/bin/python bench/bench_atp.py --goals 1000    # one size only (quick)

Rows (medians of interleaved repeats):
- ``status`` of every goal (one ``scan`` of the workspace, tolerant read, router per goal)
  against the floor of that work: the bare ``scan`` alone.
- ``show`` and ``continue`` of one goal among them (``continue`` on a goal that is
  already handed off, so it reads and decides but writes nothing: the router's cost).
- a record write (validation, link checks, content, one ``remember`` with a chosen id)
  against a bare ``remember`` of the same text, both on the real MiniLM model with
  durable commits, interleaved.
Targets (issue 9): status at 10,000 records <= 150 ms; show <= 10 ms; a record write
<= bare remember + 5 ms.

Bulk records are written with ``remember_many`` (fake embedder, not durable): each goal
is a copy of one real 10-record chain the ledger wrote, with its ids and goal id
rewritten, so the store holds exactly what the ledger would have written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from atomic_agents.atp import Identity, Ledger
from atomic_agents.atp._ids import new_record_id
from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore, default_embedder

PLAN = {"plan": "add a retry around the deploy step", "success_criteria": "two deploys in a row go green",
        "deadline": "2026-12-05T17:00:00Z", "escalation_trigger": "the deploy fails twice"}  # fmt: skip
ACTION = {"summary": "wrapped the deploy step in a retry", "rollback_steps": "git revert the retry commit"}
GREEN = {"status": "green", "evidence": "ran the deploy twice, both green", "scope_verified": "deploy retry"}


def _ledgers(store: SQLiteMemoryStore) -> dict[str, Ledger]:
    return {r: Ledger(store, Identity("acme", "acme/web", r, "alice")) for r in ("dispatcher", "builder", "verifier", "router")}


def one_chain(store: SQLiteMemoryStore) -> str:
    """A 10-record lite goal written through the ledger, left continueable at the verifier."""
    L = _ledgers(store)
    gid = L["dispatcher"].start("Add a retry to the billing deploy", requester="alice", goal_id="template-goal").goal_id
    L["dispatcher"].write("plan_record", gid, PLAN)
    L["router"].continue_(gid)  # run log + hand-off
    L["builder"].write("action_record", gid, ACTION)
    L["verifier"].write("verdict", gid, {**GREEN, "status": "red", "evidence": "second deploy failed"})
    L["dispatcher"].write("plan_record", gid, PLAN)
    L["builder"].write("action_record", gid, ACTION)
    L["router"].continue_(gid)  # run log + hand-off to the verifier: 10 records
    return gid


def fill(store: SQLiteMemoryStore, template: str, goals: int) -> None:
    mems = store.scan(Ledger(store, Identity("acme", "acme/web")).identity.workspace, {"goal_id": template})
    assert len(mems) == 10, len(mems)
    scope = Scope("builder", "alice", "acme", "acme/web")
    batch: list[tuple[str, dict[str, object]]] = []
    for g in range(goals - 1):
        gid = f"goal-{g:05d}"
        ids = {m.id: new_record_id() for m in mems}
        for m in mems:
            text = json.dumps([m.content, m.metadata]).replace(template, gid)
            for old, new in ids.items():
                text = text.replace(old, new)
            content, meta = json.loads(text)
            batch.append((content.replace("Record ID: ", "Record ID: ", 1), meta))
        if len(batch) >= 5000:
            store.remember_many(batch, scope)
            batch.clear()
    if batch:
        store.remember_many(batch, scope)


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def interleaved(fns: dict[str, Callable[[], object]], n: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(n):
        for k, fn in fns.items():
            samples[k] += timed(fn, 1)
    return {k: statistics.median(v) for k, v in samples.items()}


def bench_size(goals: int, tmp: Path, rows: list[tuple[str, str, str, str]]) -> None:
    store = SQLiteMemoryStore(tmp / f"atp-{goals}.db", embedder=HashingEmbedder(), durable=False)
    template = one_chain(store)
    t = time.perf_counter()
    fill(store, template, goals)
    load_s = time.perf_counter() - t
    ledger = _ledgers(store)["router"]
    n = 5 if goals >= 10_000 else 15
    med = interleaved({"scan": lambda: store.scan(ledger.identity.workspace), "status": lambda: ledger.status()}, n)
    records = goals * 10
    target = "<= 150 ms" if records <= 10_000 else "-"
    rows.append((f"status, {goals:,} goals / {records:,} records", f"{med['status']:.1f} ms", f"scan alone {med['scan']:.1f} ms", target))
    one = "goal-00042" if goals > 43 else template
    med = interleaved({"show": lambda: ledger.show(one), "continue": lambda: ledger.continue_(one), "records": lambda: ledger.records(one)}, 50)
    rows.append((f"show one goal among {goals:,}", f"{med['show']:.2f} ms", f"its records alone {med['records']:.2f} ms", "<= 10 ms"))
    rows.append((f"continue one goal among {goals:,} (no write)", f"{med['continue']:.2f} ms", f"its records alone {med['records']:.2f} ms", "-"))
    print(f"  [{goals:,} goals loaded in {load_s:.1f} s]", file=sys.stderr)
    store.close()


def bench_write(tmp: Path, rows: list[tuple[str, str, str, str]], n: int = 30) -> None:
    store = SQLiteMemoryStore(tmp / "write.db", embedder=default_embedder())
    L = _ledgers(store)
    gid = L["dispatcher"].start("Add a retry to the billing deploy", requester="alice").goal_id
    L["dispatcher"].write("plan_record", gid, PLAN)
    scope = Scope("builder", "alice", "acme", "acme/web")
    store.recall("warm up the model", scope)
    k = [0]
    last = L["builder"].write("action_record", gid, ACTION)

    def record() -> None:
        k[0] += 1
        L["builder"].write("action_record", gid, {**ACTION, "summary": f"wrapped deploy step {k[0]} in a retry"})

    def bare() -> None:  # the same text and metadata a record write stores, without the ledger
        k[0] += 1
        text = last.content.replace(ACTION["summary"], f"wrapped deploy step {k[0]} in a retry")
        store.remember(text, last.record, scope)

    med = interleaved({"record": record, "bare": bare}, n)
    rows.append(("record write (action_record, MiniLM, durable)", f"{med['record']:.2f} ms",
                 f"bare remember {med['bare']:.2f} ms (+{med['record'] - med['bare']:.2f})", "<= bare + 5 ms"))  # fmt: skip
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goals", type=int, action="append", help="goal counts (default 1000 and 10000)")
    args = ap.parse_args()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as d:
        for goals in args.goals or [1000, 10_000]:
            bench_size(goals, Path(d), rows)
        bench_write(Path(d), rows)
    w = [max(len(r[i]) for r in [("measure", "result", "baseline (same run)", "target"), *rows]) for i in range(4)]
    for r in [("measure", "result", "baseline (same run)", "target"), *rows]:
        print("  ".join(c.ljust(x) for c, x in zip(r, w, strict=True)))


if __name__ == "__main__":
    main()

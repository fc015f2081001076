"""Benchmark the vault -> memory mirror and context assembly, against raw baselines in the same run.

    .venv/bin/python bench/bench_context.py                       # 10,000 notes, the real model (first sync ~1 min)
    .venv/bin/python bench/bench_context.py --embedder hashing    # quick run with the fake embedder

Rows: raw embedder throughput on the notes' texts (the baseline for the first
sync); first ``vault sync`` of N notes (notes/s); incremental sync of the same N
unchanged notes (target <= 1 s); ``vault lint`` without and with the mirror
check (hand edits: stale, missing, orphaned entries); ``vault search`` p50/p95 (hybrid, one query
embedding each) vs one raw query embedding; ``context`` p50 without a query and
with one: at model.md's 4000 tokens (the first sub-index does not fit, so recall
is not searched) and at a budget with room for every sub-index and the recalled
notes (the target row: <= 50 ms plus one query embedding), and the same with the folder
watch off (a stat per note: what a process's first two looks pay); pinned notes by a full scan
(the previous path, baseline) against the pinned index with and without the watch,
and context without a query by the full scan.

``--section daemon`` (``_ctx_daemon.py``): whole-process ``context`` and ``vault search``
through ``atomic-agents daemon`` against in-process, same run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from atomic_agents.bridge import context, search, sync
from atomic_agents.bridge._mirror import check
from atomic_agents.memory import SQLiteMemoryStore, embedder_from_name
from atomic_agents.vault import Vault, lint_agent

WORDS = ("debt budget rent invoice savings tax pension loan card mortgage fund broker index bond rate fee cash "
         "salary bonus insurance claim receipt refund audit filing deadline quarter year plan goal risk").split()


def write_notes(folder: Path, n: int, rng: random.Random) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    texts = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        body = f"{words}. Topic {i} is tracked in system {i % 97}."
        texts.append(body)
        (folder / f"reference_topic_{i:05d}.md").write_text(
            f"---\nschema_version: 1\nname: Topic {i}\ndescription: When {words[:60]} matters\ntype: reference\n"
            "captured: 2026-05-06\nlast_seen: 2026-05-06\nsources: [observation]\nconfidence: low\n"
            f"pinned: {'true' if i < 3 else 'false'}\n---\n{body}\n",
            encoding="utf-8",
        )
    return texts


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    rng = random.Random(12)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "agents"
        agent, _ = Vault(root).init_agent("bench")
        (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 4000 tokens\n")
        texts = write_notes(agent.memory_dir, args.notes, rng)
        agent.rebuild_index()
        raw = embedder_from_name(args.embedder)
        sample = texts[: min(len(texts), 2000)]
        t = time.perf_counter()
        raw.embed_many(sample)
        raw_rate = len(sample) / (time.perf_counter() - t)
        store = SQLiteMemoryStore(Path(tmp) / "memory.db", embedder=embedder_from_name(args.embedder))
        t = time.perf_counter()
        first = sync(agent, store)
        first_s = time.perf_counter() - t
        assert len(first.added) == args.notes, first.to_dict()
        incr = []
        for _ in range(3):
            t = time.perf_counter()
            again = sync(agent, store)
            incr.append(time.perf_counter() - t)
            assert again.unchanged == args.notes and again.embedded == 0
        lint_agent(agent)  # the parse cache filled: lint's own baseline is its warm run
        l_plain, l_mirror, l_check = [], [], []
        for _ in range(3):
            t = time.perf_counter()
            lint_agent(agent)
            l_plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            lint_agent(agent, store=store)
            l_mirror.append(time.perf_counter() - t)
            t = time.perf_counter()
            findings = check(agent, store)
            l_check.append(time.perf_counter() - t)
            assert findings == [], findings
        queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(args.queries)]
        search(agent, store, queries[0])  # warm: the vector matrix loads once per process
        s_times, q_times = [], []
        for q in queries:
            t = time.perf_counter()
            raw.embed_batch([q])
            q_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            search(agent, store, q)
            s_times.append(time.perf_counter() - t)
        pin_scan, pin_index, pin_stat, c_scan = [], [], [], []
        agent.pinned_notes()  # built once (or brought up to date): what every later call checks
        agent.pinned_notes()  # the second look of the process sets the folder's watch up
        for _ in range(20):
            t = time.perf_counter()
            slow = agent.list_notes(pinned=True)
            pin_scan.append(time.perf_counter() - t)
            t = time.perf_counter()
            fast = agent.pinned_notes()
            pin_index.append(time.perf_counter() - t)
            os.environ["ATOMIC_AGENTS_WATCH"] = "off"  # the pinned index without the watch: a stat per file
            t = time.perf_counter()
            stat_each = agent.pinned_notes()
            pin_stat.append(time.perf_counter() - t)
            os.environ.pop("ATOMIC_AGENTS_WATCH")
            assert [n.filename for n in slow] == [n.filename for n in fast] == [n.filename for n in stat_each]
        pinned_by_index = agent.pinned_notes
        agent.pinned_notes = lambda unit_type="memory": agent.list_notes(pinned=True, unit_type=unit_type)  # type: ignore[method-assign]
        for _ in range(20):  # the previous path: pinned notes by a full scan through the parse cache
            t = time.perf_counter()
            context(agent)
            c_scan.append(time.perf_counter() - t)
        agent.pinned_notes = pinned_by_index  # type: ignore[method-assign]
        # model.md's 4000 tokens: the INDEX's first sub-index does not fit, so nothing below it
        # (recalled notes) could, and the store is not searched; a budget with room for every
        # sub-index and the recalled notes measures recall itself (the target row)
        roomy = context(agent, budget=10**9).tokens + 3000
        c_plain, c_query, c_recall, c_recall_off = [], [], [], []
        in_store: list[float] = []  # time inside store.search_hybrid during the recall contexts
        hybrid = store.search_hybrid

        def timed(*a: object, **k: object) -> object:
            t0 = time.perf_counter()
            try:
                return hybrid(*a, **k)  # type: ignore[arg-type]
            finally:
                in_store.append(time.perf_counter() - t0)

        for q in queries[:20]:
            t = time.perf_counter()
            context(agent)
            c_plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            ctx = context(agent, store, query=q)
            c_query.append(time.perf_counter() - t)
            store.search_hybrid = timed  # type: ignore[method-assign]
            t = time.perf_counter()
            rctx = context(agent, store, query=q, budget=roomy)
            c_recall.append(time.perf_counter() - t)
            store.search_hybrid = hybrid  # type: ignore[method-assign]
            os.environ["ATOMIC_AGENTS_WATCH"] = "off"
            t = time.perf_counter()
            context(agent, store, query=q, budget=roomy)
            c_recall_off.append(time.perf_counter() - t)
            os.environ.pop("ATOMIC_AGENTS_WATCH")
        recalled = sum(1 for p in rctx.parts if p.kind == "recalled")
        c_base = []
        for _ in range(20):  # the same context without a query, at the same budget: what recall adds is the rest
            t = time.perf_counter()
            context(agent, budget=roomy)
            c_base.append(time.perf_counter() - t)
        store.close()
    emb = statistics.median(q_times) * 1000
    rows = [
        ("raw embedder (baseline)", f"{raw_rate:,.0f} notes/s", f"{len(sample)} texts, embed_many"),
        (f"vault sync, first ({args.notes:,} notes)", f"{args.notes / first_s:,.0f} notes/s", f"{first_s:.2f} s"),
        (f"vault sync, incremental ({args.notes:,} unchanged)", f"{min(incr):.3f} s",
         f"target <= 1 s; 0 embedded; median {statistics.median(incr):.3f} s"),
        ("vault lint, warm (baseline)", f"{min(l_plain):.3f} s", f"{args.notes:,} notes, no store"),
        ("vault lint + mirror check", f"{min(l_mirror):.3f} s",
         f"the check alone {min(l_check):.3f} s: one mirror scan, one read per file, nothing embedded"),
        ("raw query embedding (baseline)", f"{emb:.1f} ms", "p50"),
        ("vault search p50 / p95", f"{statistics.median(s_times) * 1000:.1f} / {pct(s_times, 0.95) * 1000:.1f} ms",
         "hybrid, incl. the query embedding"),
        ("pinned notes: full scan (baseline)", f"{statistics.median(pin_scan) * 1000:.1f} ms",
         "list_notes(pinned=True), through the parse cache"),
        ("pinned notes: pinned index, a stat per file", f"{statistics.median(pin_stat) * 1000:.1f} ms",
         "ATOMIC_AGENTS_WATCH=off (and a process's first two looks); pinned files read; same notes"),
        ("pinned notes: pinned index, watched folder", f"{statistics.median(pin_index) * 1000:.1f} ms",
         "inotify: only what changed is stat'ed; pinned files read; same notes"),
        ("context p50, no query, full scan (baseline)", f"{statistics.median(c_scan) * 1000:.1f} ms",
         "pinned notes found the previous way"),
        ("context p50, no query", f"{statistics.median(c_plain) * 1000:.1f} ms", f"{ctx.budget} token budget"),
        ("context p50, with a query", f"{statistics.median(c_query) * 1000:.1f} ms",
         f"{ctx.budget} token budget; {len(ctx.parts)} parts, {len(ctx.dropped)} dropped (recall: not searched)"),
        ("context p50, no query, roomy budget", f"{statistics.median(c_base) * 1000:.1f} ms",
         f"{roomy:,} tokens: every sub-index in"),
        ("context p50, with a query, recalled notes in", f"{statistics.median(c_recall) * 1000:.1f} ms",
         f"target <= 50 ms + {emb:.1f} ms embedding; {recalled} recalled, {len(rctx.parts)} parts"),
        ("context p50, with a query, recalled notes in, no watch", f"{statistics.median(c_recall_off) * 1000:.1f} ms",
         "ATOMIC_AGENTS_WATCH=off: a stat per note, the sub-indexes listed (the previous path)"),
        ("  of which store.search_hybrid (1 call)", f"{statistics.median(in_store) * 1000:.1f} ms",
         "the store's part (incl. the query embedding); the rest is the bridge's"),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"bench_context: {args.notes:,} notes, embedder {raw.model_id}")
    for name, val, note in rows:
        print(f"  {name:<{w}}  {val:>18}  {note}")
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:3] == ["--section", "daemon"]:  # whole-process context / vault search via the daemon (_ctx_daemon.py)
        from _ctx_daemon import run

        run(sys.argv[3:])
    else:
        main()

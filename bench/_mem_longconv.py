"""Retrieval over long conversations (bench/data/longconv): one store per conversation, one memory per turn.

Part of ``bench/bench_memory.py --section quality`` (its second table) and of ``--fit``,
whose ranking and score constants are fitted on the dev questions of both labelled sets.
Each conversation gets its own SQLite store, its turns written as ``"Name: text"`` with
``{speaker, session, date, turn}`` metadata, as an agent's chat memory would store them; a
question's pool is built exactly as for the main set (:func:`_mem_quality.pool_of`), and a
question is answered when its evidence turns come back (turn recall@k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _longconv_data import AS_RECALL_EVAL_KIND, load

from atomic_agents.memory import Scope, SQLiteMemoryStore

SCOPE = Scope("chat", "bench")


@dataclass
class LongConv:
    """Every question of the split, with its store's pool, its evidence seqs and its store's texts."""

    queries: list[str] = field(default_factory=list)
    pools: list[dict[int, dict[str, float]]] = field(default_factory=list)
    wants: list[set[int]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    texts: list[dict[int, str]] = field(default_factory=list)
    store_of: list[int] = field(default_factory=list)
    stores: list[SQLiteMemoryStore] = field(default_factory=list)
    turns: int = 0

    def check_api(self, cal: Any, rank_hybrid: Any, per_store: int = 8) -> None:
        """The pools mirror the stores: ``search_hybrid``'s top 10 equals the pool's ranking for some questions."""
        seen: dict[int, int] = {}
        for q, p, n in zip(self.queries, self.pools, self.store_of, strict=True):
            if seen.setdefault(n, 0) >= per_store:
                continue
            seen[n] += 1
            store = self.stores[n]
            api = [store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0] for h in store.search_hybrid(q, SCOPE, limit=10)]
            mine = [k for _, k in rank_hybrid(p, cal)[:10]]
            assert api == mine, (q, api, mine)

    def close(self) -> None:
        for s in self.stores:
            s.close()


def build(emb: Any, tmp: Path, split: str | None, pool_of: Any) -> LongConv:
    """Stores and pools for the conversations' questions of ``split`` (``None``: all)."""
    out = LongConv()
    for n, conv in enumerate(load(split)):
        store = SQLiteMemoryStore(tmp / f"longconv-{n}.db", embedder=emb, durable=False)
        out.stores.append(store)
        turns = conv["turns"]
        out.turns += len(turns)
        ids = store.remember_many(
            [(f"{t['speaker']}: {t['text']}", {"speaker": t["speaker"], "session": t["session"], "date": t["date"], "turn": t["id"]})
             for t in turns], SCOPE,
        )  # fmt: skip
        seq_of = dict(store._read("SELECT id, seq FROM memories"))
        by_turn = {t["id"]: seq_of[i] for t, i in zip(turns, ids, strict=True)}
        text = {by_turn[t["id"]]: f"{t['speaker']}: {t['text']}" for t in turns}
        for q in conv["questions"]:
            out.queries.append(q["question"])
            out.pools.append(pool_of(store, q["question"], scope=SCOPE))
            out.wants.append({by_turn[e] for e in q["evidence"]})
            out.kinds.append(AS_RECALL_EVAL_KIND[q["kind"]])
            out.texts.append(text)
            out.store_of.append(n)
    return out


def shared_store_rows(emb: Any, tmp: Path, split: str | None, reps: int = 0) -> list[tuple[str, str, str, str]]:
    """The same conversations in one store, a scope each (as a team's chat memory would keep them):
    ``search_hybrid`` turn recall@10 with the scope's own document frequencies in the semantic query,
    against the store's alone (``_scope_idfs`` patched to find none), same store, same questions."""
    store = SQLiteMemoryStore(tmp / "longconv-shared.db", embedder=emb, durable=False)
    asked: list[tuple[Scope, str, set[int]]] = []
    for n, conv in enumerate(load(split)):
        scope = Scope(f"chat-{n}", "bench")
        turns = conv["turns"]
        ids = store.remember_many([(f"{t['speaker']}: {t['text']}", None) for t in turns], scope)
        seq_of = dict(store._read("SELECT id, seq FROM memories"))
        by_turn = {t["id"]: seq_of[i] for t, i in zip(turns, ids, strict=True)}
        asked += [(scope, q["question"], {by_turn[e] for e in q["evidence"]}) for q in conv["questions"] if q["evidence"]]

    def recall10() -> float:
        got = []
        for scope, q, want in asked:
            hits = {store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0] for h in store.search_hybrid(q, scope, limit=10)}
            got.append(len(want & hits) / len(want))
        return sum(got) / len(got)

    with_scope = recall10()
    store._scope_idfs = lambda *_a: None  # type: ignore[method-assign]
    store_only = recall10()
    store.close()
    return [(f"long conversations in one store, a scope each: search_hybrid turn recall@10 ({len(asked)} questions)",
             f"{with_scope:.3f}", f"{store_only:.3f} with the store's document frequencies alone", "-")]  # fmt: skip

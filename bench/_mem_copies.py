"""Copies of one content and the ANN tier: copy groups (now) vs copies inside the graph (before).

    .venv/bin/python bench/bench_memory.py --section copies
    .venv/bin/python bench/bench_memory.py --section copies --dim 384 --singles 20000

Per case: ``--singles`` random unit vectors in one scope, 100 more in a small scope, and
copies (N contents x M copies each, in the big scope). Three indexes over the same rows,
in this process: the ANN tier now (copies held out of the graph, ``_ann_copies``), the ANN
tier as before (the copy groups turned off: every copy in the graph), and exact search.
For 100 small-scope and 100 whole-store top-10 searches (queries near rows, 0.3 noise):
answers that differ from exact (by score list), searches that fell back to an exact scan,
and search p50 (ms; queries interleaved over the three indexes).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from atomic_agents.memory import _ann_copies
from atomic_agents.memory._vectors import VectorIndex

CASES = ((1, 3000), (10, 300), (100, 30), (1000, 3), (0, 0))


def _index(keys: np.ndarray, vecs: np.ndarray, scopes: list[tuple[str, str, str, str]], *, groups: bool) -> VectorIndex:
    ix = VectorIndex(vecs.shape[1])
    ix.upsert_many(keys, vecs, scopes, [None] * len(keys))
    if groups:
        ix.build_ann()
    else:  # before: no row is ever grouped
        split, route = _ann_copies.CopyGroups.split, _ann_copies.CopyGroups.route
        _ann_copies.CopyGroups.split = lambda self, k, v, t: np.ones(len(k), bool)  # type: ignore[method-assign]
        _ann_copies.CopyGroups.route = lambda self, k, v, t: (np.ones(len(k), bool), [])  # type: ignore[method-assign]
        try:
            ix.build_ann()
        finally:
            _ann_copies.CopyGroups.split, _ann_copies.CopyGroups.route = split, route  # type: ignore[method-assign]
    return ix


def case_rows(contents: int, copies: int, singles: int, dim: int) -> list[tuple[str, str, str, str]]:
    rng = np.random.default_rng(3)
    single = rng.standard_normal((singles, dim)).astype(np.float32)
    small = rng.standard_normal((100, dim)).astype(np.float32)
    dup = rng.standard_normal((contents, dim)).astype(np.float32)
    vecs = np.concatenate([single, small, np.repeat(dup, copies, axis=0)])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    big_sc, small_sc = ("a", "big", "o", "w"), ("a", "small", "o", "w")
    scopes = [big_sc] * singles + [small_sc] * 100 + [big_sc] * (contents * copies)
    keys = np.arange(1, len(vecs) + 1, dtype=np.int64)
    now_ix, before_ix = _index(keys, vecs, scopes, groups=True), _index(keys, vecs, scopes, groups=False)
    exact = VectorIndex(dim)
    exact.upsert_many(keys, vecs, scopes, [None] * len(keys))
    near_small = vecs[singles : singles + 100]
    step = max(1, (contents * copies) // 50)
    near_big = np.concatenate([vecs[:50], vecs[singles + 100 :: step][:50]]) if contents else vecs[:100]
    rows = []
    for name, near, sc in (("small scope", near_small, small_sc), ("whole store", near_big, big_sc)):
        qs = near + 0.3 * rng.standard_normal(near.shape).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        stats = {k: {"wrong": 0, "exact": 0, "t": []} for k in ("now", "before", "exact")}
        for q in qs:
            want = exact.search(q, sc, 10, now=0.0)
            for label, ix in (("now", now_ix), ("before", before_ix), ("exact", exact)):
                scans: list[int] = []
                real = ix._exact
                ix._exact = lambda *a, real=real, scans=scans, **kw: scans.append(1) or real(*a, **kw)  # type: ignore[method-assign]
                t0 = time.perf_counter()
                got = ix.search(q, sc, 10, now=0.0)
                stats[label]["t"].append((time.perf_counter() - t0) * 1e3)  # type: ignore[union-attr]
                ix._exact = real  # type: ignore[method-assign]
                stats[label]["exact"] += bool(scans)  # type: ignore[operator]
                if len(got) != len(want) or not np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6):
                    stats[label]["wrong"] += 1  # type: ignore[operator]
        label = f"{contents:,} x {copies:,} copies" if contents else "no copies"
        p50 = {k: float(np.median(v["t"])) for k, v in stats.items()}  # type: ignore[arg-type]
        rows.append((
            f"{label}, {name}",
            f"{stats['now']['wrong']} / {stats['now']['exact']} / {p50['now']:.2f}",
            f"{stats['before']['wrong']} / {stats['before']['exact']} / {p50['before']:.2f}",
            f"{p50['exact']:.2f}",
            f"{len(now_ix.ann or ())} + {len(now_ix.ann.copies) if now_ix.ann else 0}",
        ))  # fmt: skip
    return rows


def run(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--singles", type=int, default=3000)
    ap.add_argument("--dim", type=int, default=32)
    args = ap.parse_args(list(argv))
    print(f"\n## copies of one content, ANN tier ({args.singles:,} + 100 random {args.dim}-d rows plus the copies;"
          " 100 top-10 searches per row)\n")  # fmt: skip
    print("| case | now: wrong / exact scans / p50 ms | before (copies in the graph): wrong / exact scans / p50 ms"
          " | exact search p50 ms | graph + copy groups (rows) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for contents, copies in CASES:
        for row in case_rows(contents, copies, args.singles, args.dim):
            print("| " + " | ".join(row) + " |", flush=True)

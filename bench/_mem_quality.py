"""Retrieval quality on the labelled set (bench/data/recall_eval) and keyword rank-first latency.

    .venv/bin/python bench/bench_memory.py --section quality                 # test split, the shipped constants
    .venv/bin/python bench/bench_memory.py --section quality --split dev --fit   # fit constants on dev, print them
    .venv/bin/python bench/bench_memory.py --section quality --latency 100000    # + keyword rank-first, hybrid at 100k

Builds a temporary SQLite store of the whole corpus with the real default embedder,
then for every query of the split reports recall@5, recall@10 and MRR (answerable
queries) for keyword (``search``), semantic (``recall``), hybrid (``search_hybrid``)
and two baselines over the same pools: the previous fusion (max of cosine and
"best keyword hit = 1" + a bonus) and a plain convex blend of max-normalised bm25
and min-max-normalised cosine (weight tuned on dev). The floor columns: share of
queries whose top-1 is right that keep a top-1 score >= 0.45, and share of
irrelevant queries whose top-1 scores >= 0.45 (targets >= 90% and <= 10%).

The opt-in re-rank stage (``search_hybrid(..., rerank=True)``, ``memory/_rerank.py``) gets
its own rows: the same pools, its top ``RERANK_DEPTH`` re-read with the model's token states,
and its latency per query against plain hybrid, interleaved in the same run. Why it is not a
cross-encoder: no PyPI package ships one inside its wheel (examined: flashrank, swiftrank,
rerankers, fastembed-style loaders, small-hybrid-reranker, gatrag-context-classifier,
convmemory, rerankgate, coremem, knowledge-rag, markdown-memory, lynx-mcp, sift-rag,
litesearch, watson-lite, tinyintent, edgejev, kjarni, libembedding-ng: all fetch weights
from a hub at run time or ship none).

``--fit`` (dev split only) fits the calibration of ``memory/_scoring.py``: a pairwise
logistic ranker over the dev pools (relevant above not) gives the hybrid weights of
(cosine, evidence, relative evidence, squared keyword coverage), then
each ranker's score is a logistic map of its signal fitted on top-1 hits: the
probability that the top-1 hit is right (an irrelevant query's top-1 never is).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic_agents.memory import (
    HashingEmbedder,
    Scope,
    SQLiteMemoryStore,
    default_embedder,
)
from atomic_agents.memory import _scoring as scoring
from atomic_agents.memory import _words
from atomic_agents.memory._sqlite_keyword import Matches

import _mem_longconv  # bench/_mem_longconv.py: the second labelled set, one store per conversation

FLOOR = 0.45
SCOPE = Scope("eval", "bench")
POOL = scoring.HYBRID_POOL
#: The convex-blend baseline's weight, as tuned on the dev split (``--split dev`` re-tunes it).
BLEND_ALPHA = 0.90
#: GENERIC's hybrid score map (the ranking key through one logistic), for comparison with the fitted one.
GENERIC_SCORE_MAP = {f: getattr(scoring.GENERIC, f) for f in ("sc_c", "sc_e", "sc_k", "sc_v", "sc_m", "sc_n", "sc_cm", "sc_b")}


def _load(split: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from _recall_eval_data import load  # bench/_recall_eval_data.py

    return load(split)


# -- candidate pools with every signal ------------------------------------------------------


def pool_of(store: SQLiteMemoryStore, query: str, depth: int = POOL, scope: Scope = SCOPE) -> dict[int, dict[str, float]]:
    """``seq -> {cos, ev, rel, cov, lack, bm25, sem_rank, kw_rank}`` for the candidates ``search_hybrid`` looks at."""
    _, index, _, found = store._semantic(query, scope, {}, depth)
    fq = scoring.fts_query(query, forms=True)
    kw_rows = store._keyword_rows(fq, scope, depth, {}) if fq else []
    mass = sum(store._idf(query).values())
    cands: dict[int, dict[str, float]] = defaultdict(dict)
    for i, (k, c) in enumerate(found):
        cands[k].update(cos=c, sem_rank=i)
    for i, r in enumerate(kw_rows):
        cands[r[0]].update(bm25=-r[-1], kw_rank=i)
    for n, k in store._successors(list(cands), scope, {}).items():  # the reply after a candidate joins the pool
        cands[n]["succ_only"] = float(n not in cands)
        cands[n]["prev"] = k
    qv = np.asarray(store.embedder.embed_batch([store._semantic_text(query, scope, index.scope_rows(scope.key()))])[0], dtype=np.float32)
    for k, c in index.scores_for(qv, [k for k in cands if "cos" not in cands[k]]).items():
        cands[k]["cos"] = c
    if fq:
        for k, b in store._read(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid IN (%s)"
            % ",".join("?" * len(cands)), [fq, *cands],
        ):  # fmt: skip
            cands[k]["bm25"] = -b
    kw_found = store._matches(query)
    coverage, lacking = kw_found.coverage(cands), kw_found.lacking(cands)
    scov = kw_found.score_coverage(cands)  # a query asking two things: the best-held question's share too
    for k, d in cands.items():
        d["lack"] = float(k in lacking)
        d.setdefault("cos", 0.0)
        d.setdefault("bm25", 0.0)
        d["ev"] = scoring.keyword_evidence(d["bm25"], mass)
        d["cov"] = coverage.get(k, 0.0) if d["bm25"] > 0 else 0.0
        d["pcov"] = scov.get(k, 0.0) if d["bm25"] > 0 else 0.0
    best = max((d["ev"] for d in cands.values()), default=0.0)
    for d in cands.values():
        d["rel"] = d["ev"] / best if best > 0 else 0.0
    return dict(cands)


# -- rankers over a pool (for baselines and for scoring with candidate constants) ------------


def rank_hybrid(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    return scoring.fuse_pool(
        {k: d["cos"] for k, d in p.items()}, {k: d["ev"] for k, d in p.items()}, cal, {k: d["cov"] for k, d in p.items()},
        {k for k, d in p.items() if d.get("lack")}, {k: d["prev"] for k, d in p.items() if "prev" in d},
        {k: d.get("pcov", d["cov"]) for k, d in p.items()},
    )


def rank_no_context(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    """Hybrid over the rankers' own candidates, without the reply context (the fusion before it)."""
    return rank_hybrid({k: d for k, d in p.items() if not d.get("succ_only")}, replace(cal, hy_ctx=0.0))


#: The default score map before it read a two-part question's best-held question (the baseline row).
BEFORE_PARTS = replace(scoring.DEFAULT, sc_c=12.365, sc_cm=-6.208, sc_m=-1.472, sc_v=3.050, sc_n=-1.596, sc_b=-4.241)


def rank_previous_constants(p: dict[int, dict[str, float]], _: scoring.Calibration) -> list[tuple[float, int]]:
    """Hybrid as shipped before the long conversations: their constants, no reply context, no parts."""
    return rank_no_context({k: {**d, "pcov": d["cov"]} for k, d in p.items()}, PREVIOUS)


def rank_before_parts(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    """Hybrid as shipped before the score read a two-part question's best-held question (its constants too)."""
    return rank_hybrid({k: {**d, "pcov": d["cov"]} for k, d in p.items()}, BEFORE_PARTS)


#: The default constants before the long conversations and the reply context (the baseline rows).
PREVIOUS = replace(
    scoring.DEFAULT, hy_c=15.511, hy_e=1.966, hy_k=-3.429, hy_v=16.751, hy_ctx=0.0, hy_n=0.0, sc_c=12.546, sc_cm=-7.728,
    sc_m=-0.791, sc_v=1.703, sc_n=-2.399, sc_b=-4.104,
)  # fmt: skip


def rank_semantic(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    """``recall``: nearest first, each hit scored by the hybrid map of its cosine and what it holds (not capped)."""
    got = sorted((d["sem_rank"], k) for k, d in p.items() if "sem_rank" in d)
    return [(scoring.semantic_score(p[k]["cos"], cal, max(p[k]["cov"], p[k].get("pcov", 0.0)), bool(p[k].get("lack"))), k)
            for _, k in got]  # fmt: skip


def rank_semantic_before(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    """``recall`` before it read the hits' words: ``sigma(sem_a cos + sem_b)``, the cosine alone."""
    got = sorted((d["sem_rank"], k) for k, d in p.items() if "sem_rank" in d)
    return [(1.0 / (1.0 + math.exp(-(cal.sem_a * p[k]["cos"] + cal.sem_b))), k) for _, k in got]


def rank_keyword(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> list[tuple[float, int]]:
    """``search``: FTS5's order, each hit scored by its evidence and what it holds of the query (not capped)."""
    got = [(d["kw_rank"], k) for k, d in p.items() if "kw_rank" in d]
    return [(scoring.keyword_score(p[k]["ev"], max(p[k]["cov"], p[k].get("pcov", 0.0)), bool(p[k].get("lack")), cal), k)
            for _, k in sorted(got)]  # fmt: skip


#: The keyword score map before it read coverage: ``sigma(8.206 e - 5.140)`` (evidence alone).
KEYWORD_BEFORE = replace(scoring.DEFAULT, kw_a=8.206, kw_b=-5.140, kw_v=0.0, kw_n=0.0)


def rank_keyword_before(p: dict[int, dict[str, float]], _: scoring.Calibration) -> list[tuple[float, int]]:
    return rank_keyword(p, KEYWORD_BEFORE)


def keyword_feats(d: dict[str, float]) -> list[float]:
    """The keyword score map's signals of one hit: squared coverage the score reads, lacks a name."""
    return [max(d["cov"], d.get("pcov", 0.0)) ** 2, d.get("lack", 0.0)]


def rank_previous(p: dict[int, dict[str, float]], _: scoring.Calibration) -> list[tuple[float, int]]:
    """The fusion before issue 8: max(sem, kw) + bonus, kw = 0.5 + 0.5 * bm25 / best bm25."""
    best = max((d["bm25"] for d in p.values() if "kw_rank" in d), default=0.0)
    out = []
    for k, d in p.items():
        kw = 0.5 + 0.5 * d["bm25"] / best if "kw_rank" in d and best > 0 else 0.0
        sem = max(d["cos"], 0.0)
        hi, lo = max(sem, kw), min(sem, kw)
        out.append((min(1.0, hi + 0.2 * lo * (1.0 - hi)), k))
    return sorted(out, reverse=True)


def make_blend(alpha: float) -> Callable[[dict[int, dict[str, float]], scoring.Calibration], list[tuple[float, int]]]:
    """Plain convex blend: alpha * min-max cosine + (1 - alpha) * max-normalised bm25 (the issue's baseline)."""

    def rank(p: dict[int, dict[str, float]], _: scoring.Calibration) -> list[tuple[float, int]]:
        cs = [d["cos"] for d in p.values()]
        lo, hi = min(cs, default=0.0), max(cs, default=0.0)
        best = max((d["bm25"] for d in p.values()), default=0.0)
        out = []
        for k, d in p.items():
            c = (d["cos"] - lo) / (hi - lo) if hi > lo else 0.0
            b = d["bm25"] / best if best > 0 else 0.0
            out.append((alpha * c + (1 - alpha) * b, k))
        return sorted(out, reverse=True)

    return rank


# -- metrics -------------------------------------------------------------------------------


def frontier(right: Sequence[float], irrelevant: Sequence[float]) -> tuple[float, float]:
    """Best any threshold on these top-1 scores can do: (kept at <= 10% admitted, admitted at >= 90% kept)."""
    r, i = np.asarray(right), np.asarray(irrelevant)
    cuts = np.unique(np.r_[r, i, np.inf])
    kept = max(float(np.mean(r >= t)) for t in cuts if np.mean(i >= t) <= 0.10) if len(r) else 0.0
    adm = min((float(np.mean(i >= t)) for t in cuts if np.mean(r >= t) >= 0.90), default=1.0) if len(i) else 0.0
    return kept, adm


def metrics(ranked: Sequence[Sequence[tuple[float, int]]], wants: Sequence[set[int]], kinds: Sequence[str],
            sources: Sequence[set[str]] = ()) -> dict[str, Any]:  # fmt: skip
    r5, r10, rr, kept, right, admitted, irr = [], [], [], 0, 0, 0, 0
    right_s: list[float] = []
    irr_s: list[float] = []
    per_source: dict[str, list[float]] = defaultdict(list)
    per_kind: dict[str, list[float]] = defaultdict(list)
    per_kind10: dict[str, list[float]] = defaultdict(list)
    for n, (hits, want, kind) in enumerate(zip(ranked, wants, kinds, strict=True)):
        ids = [k for _, k in hits]
        if not want:
            irr += 1
            admitted += bool(hits) and hits[0][0] >= FLOOR
            irr_s.append(hits[0][0] if hits else 0.0)
            continue
        r5.append(len(want & set(ids[:5])) / len(want))
        r10.append(len(want & set(ids[:10])) / len(want))
        per_kind[kind].append(r5[-1])
        per_kind10[kind].append(r10[-1])
        for src in sources[n] if sources else ():
            per_source[src].append(r10[-1])
        rr.append(next((1.0 / (i + 1) for i, k in enumerate(ids) if k in want), 0.0))
        if ids and ids[0] in want:
            right += 1
            kept += hits[0][0] >= FLOOR
            right_s.append(hits[0][0])
    mean = statistics.fmean
    return {
        "r5": mean(r5) if r5 else 0.0, "r10": mean(r10) if r10 else 0.0, "mrr": mean(rr) if rr else 0.0,
        "kept": kept / right if right else 0.0, "admitted": admitted / irr if irr else 0.0, "n": len(r5), "irr": irr,
        "kinds": {k: mean(v) for k, v in sorted(per_kind.items())}, "kinds10": {k: mean(v) for k, v in sorted(per_kind10.items())},
        "sources": {k: mean(v) for k, v in sorted(per_source.items())}, "frontier": frontier(right_s, irr_s),
    }  # fmt: skip


# -- fitting (dev only) ---------------------------------------------------------------------


def _logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, iters: int = 50) -> np.ndarray:
    """Weights (last one the intercept) of an L2-regularised logistic regression, by Newton steps."""
    X = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        g = X.T @ (p - y) + l2 * np.r_[w[:-1], 0.0]
        h = (X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w))
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _top1_map(z: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """(a, b) of sigma(a * z + b) = P(the top-1 hit is right), fitted on top-1 hits (irrelevant queries: never right)."""
    w = _logistic(z[:, None], right.astype(float))
    return float(w[0]), float(w[1])


def _pairs(pools: list[dict[int, dict[str, float]]], wants: list[set[int]], feats: Callable[[dict[str, float]], list[float]]) -> np.ndarray:
    """Feature differences (relevant minus not) within each query: what a ranking must order."""
    out = []
    for p, want in zip(pools, wants, strict=True):
        pos = [feats(d) for k, d in p.items() if k in want]
        neg = sorted((feats(d) for k, d in p.items() if k not in want), key=lambda x: -x[0])[:30]
        out += [np.subtract(a, b) for a in pos for b in neg]
    return np.asarray(out)


def _pairwise(x: np.ndarray, l2: float = 1e-2) -> np.ndarray:
    """Weights of a pairwise logistic ranker (no intercept): P(a above b) = sigma(w . (x_a - x_b))."""
    w = np.zeros(x.shape[1])
    for _ in range(60):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(len(w)), x.T @ (p - 1.0) + l2 * w)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def fit(pools: list[dict[int, dict[str, float]]], wants: list[set[int]], rank_pools: list[dict[int, dict[str, float]]] = (),
        rank_wants: list[set[int]] = (), ranking: scoring.Calibration | None = None) -> scoring.Calibration:  # fmt: skip
    """Hybrid direction from a pairwise ranker over dev pools; each ranker's map from its dev top-1 hits.

    The ranking: a pairwise logistic ranker's direction over (c, e, k, v^2), then ``hy_ctx``
    (0, 0.1, ..., 0.9) and ``hy_n`` (0, -0.25, ..., -3) by dev recall@5 + recall@10 over both
    sets. ``ranking`` given, its ranking constants are kept and only ``hy_n`` is chosen that way
    (the shipped constants predate word forms; a refit of their direction over today's pools
    gave lower dev recall, see the README).

    The hybrid score map has its own direction: a logistic fit, on the dev top-1 hits of the
    hybrid ranking, of "right" against "an unanswerable query's top-1" (the two populations the
    0.45 floor must separate), its intercept then moved so that 0.45 sits at the dev threshold
    where the larger shortfall from the two targets (kept >= 90%,
    admitted <= 10%) is smallest.

    ``rank_pools`` / ``rank_wants`` (the long conversations' dev questions) join the fit of the
    ranking (the pairwise direction, ``hy_ctx`` and ``hy_n``), not of the score maps: their
    unanswerable questions mostly ask about the other speaker's event, which no signal
    separates, and fitted in they move the floor off the main set's (see the README).
    """
    feats = lambda d: [d["cos"], d["ev"], d["rel"], d["cov"] ** 2]
    own = lambda ps: [{k: d for k, d in p.items() if not d.get("succ_only")} for p in ps]  # the rankers' candidates

    def dev_recall(cal: scoring.Calibration) -> float:  # recall@5 + recall@10 over every answerable dev query
        m = metrics([rank_hybrid(p, cal) for p in [*pools, *rank_pools]], [*wants, *rank_wants], ["x"] * (len(wants) + len(rank_wants)))
        return m["r5"] + m["r10"]

    if ranking is None:
        w = _pairwise(_pairs(own([*pools, *rank_pools]), [*wants, *rank_wants], feats))
        print(f"pairwise ranker (cos, ev, rel, cov^2): {np.round(w, 3).tolist()}")
        cal0 = replace(scoring.DEFAULT, hy_c=float(w[0]), hy_e=float(w[1]), hy_k=float(w[2]), hy_v=float(w[3]), hy_n=0.0)
        # below 1, so a reply never passes its own question (at 1 it would tie and, newer, go first)
        grid = {lam / 10: dev_recall(replace(cal0, hy_ctx=lam / 10)) for lam in range(10)}
        cal0 = replace(cal0, hy_ctx=max(grid, key=lambda lam: (grid[lam], -lam)))
        print("share of a better-matching predecessor (hy_ctx): dev recall@5 + recall@10 "
              + ", ".join(f"{lam:.1f}: {v:.3f}" for lam, v in grid.items()) + f"; chosen {cal0.hy_ctx:.1f}")  # fmt: skip
    else:
        w = np.asarray([ranking.hy_c, ranking.hy_e, ranking.hy_k, ranking.hy_v])
        cal0 = replace(ranking, hy_n=0.0)
        print(f"ranking kept: (cos, ev, rel, cov^2) {np.round(w, 3).tolist()}, hy_ctx {cal0.hy_ctx:.1f}")
    # a name the question asks about, lacking: ties to the smaller weight
    grid = {-q / 4: dev_recall(replace(cal0, hy_n=-q / 4)) for q in range(13)}
    cal0 = replace(cal0, hy_n=max(grid, key=lambda h: (round(grid[h], 9), h)))
    print("ranking weight of lacking a name the question asks about (hy_n): dev recall@5 + recall@10 "
          + ", ".join(f"{h:.2f}: {v:.3f}" for h, v in grid.items()) + f"; chosen {cal0.hy_n:.2f}")  # fmt: skip

    def top1(rank: Callable[..., list[tuple[float, int]]], signal: Callable[[dict[str, float]], float]) -> tuple[float, float]:
        z, right = [], []
        for p, want in zip(pools, wants, strict=True):
            hits = rank(p, cal0)
            if hits:
                z.append(signal(p[hits[0][1]]))
                right.append(hits[0][1] in want)
        return _top1_map(np.asarray(z), np.asarray(right))

    sa, sb = top1(rank_semantic_before, lambda d: d["cos"])  # the cosine alone: where the model reaches 0.45
    # the keyword map: fitted like the hybrid score map below (right top-1 against an unanswerable
    # query's, 0.45 placed for both targets), over what the hit holds of the query
    xk, yk, ek = [], [], []
    for p, want in zip(pools, wants, strict=True):
        hits = rank_keyword(p, cal0)
        if hits and (hits[0][1] in want or not want):
            xk.append(keyword_feats(p[hits[0][1]]))
            ek.append(min(p[hits[0][1]]["ev"], 1.0))
            yk.append(float(hits[0][1] in want))
    xka, yka = np.asarray(xk), np.asarray(yk)
    with_e = _logistic(np.c_[ek, xka], yka)
    print(f"keyword score direction with the evidence (e, u^2, lacks a name): {np.round(with_e[:3], 3).tolist()} "
          "(e's weight is left at 0 when negative: a score must not fall as the memory holds more)")  # fmt: skip
    vk = _logistic(xka, yka) if with_e[0] < 0 else with_e[1:]
    ka = 0.0 if with_e[0] < 0 else float(with_e[0])
    kb, kcut = _place_floor(xka @ vk[:2] + ka * np.asarray(ek), yka)
    zk = xka @ vk[:2] + ka * np.asarray(ek)
    print(f"keyword score map (e, u^2, lacks a name): {[round(ka, 3), *np.round(vk[:2], 3).tolist()]}, intercept {kb:.3f} "
          f"(dev kept {np.mean(zk[yka == 1] >= kcut):.1%}, admitted {np.mean(zk[yka == 0] >= kcut):.1%})")  # fmt: skip
    x, y = [], []
    for p, want in zip(pools, wants, strict=True):
        hits = rank_hybrid(p, cal0)
        if hits and (hits[0][1] in want or not want):
            x.append(score_feats(p[hits[0][1]]))
            y.append(float(hits[0][1] in want))
    xa, ya = np.asarray(x), np.asarray(y)
    n = xa.shape[1]
    v = _logistic(xa, ya)
    sc_b, cut = _place_floor(xa @ v[:n], ya)
    z = xa @ v[:n]
    print(f"hybrid score direction (cos, cos * (e > 0) * (1 - cov^2), e > 0, cov^2, lacks a name): {np.round(v[:n], 3).tolist()}, fitted intercept {v[n]:.3f}, "
          f"moved to {sc_b:.3f} (dev kept {np.mean(z[ya == 1] >= cut):.1%}, admitted {np.mean(z[ya == 0] >= cut):.1%})")  # fmt: skip
    # GENERIC's score map (embedders without fitted constants): the ranking key through one logistic,
    # plus the name term (a keyword signal: it does not lean on the model's cosine levels)
    key = np.asarray([feats(p[h[0][1]]) for p, want in zip(pools, wants, strict=True)
                      if (h := rank_hybrid(p, cal0)) and (h[0][1] in want or not want)]) @ w  # fmt: skip
    g = _logistic(np.c_[key, xa[:, 4]], ya)
    print(f"GENERIC hybrid score map (the ranking key through one logistic, + lacks a name): "
          f"{dict(zip(('sc_c', 'sc_e', 'sc_k', 'sc_v'), np.round(g[0] * w, 3).tolist()))}, sc_n={g[1]:.3f}, sc_b={g[2]:.3f}")
    return scoring.Calibration(
        sem_a=sa, sem_b=sb, kw_a=ka, kw_b=kb, kw_v=float(vk[0]), kw_n=float(vk[1]), hy_c=cal0.hy_c, hy_e=cal0.hy_e, hy_k=cal0.hy_k, hy_v=cal0.hy_v, hy_ctx=cal0.hy_ctx, hy_n=cal0.hy_n,
        sc_c=float(v[0]), sc_cm=float(v[1]), sc_e=0.0, sc_k=0.0, sc_m=float(v[2]), sc_v=float(v[3]), sc_n=float(v[4]),
        sc_b=sc_b,
    )  # fmt: skip


def score_feats(d: dict[str, float]) -> list[float]:
    """The hybrid score map's signals of one hit: cosine, cosine of a partial match (shares a query word, weighted
    by the share of the query's IDF mass it lacks), "matches a query word", squared coverage, lacks a name.

    Chosen by 5-fold cross-validation on dev (the feature table of :func:`feature_experiment`):
    evidence ``e`` and coverage ``v`` of top-1 hits correlate at 0.99, so a fit over both put a
    negative weight on ``e`` that stood for a step (a memory sharing some words with the query,
    at the same cosine, is less often right than one sharing none: part of its cosine is those
    words) and made the score fall as a memory held more of the query. The step ``e > 0`` plus
    ``v**2`` says the same monotonically in what the memory holds, and did better in cross-validation;
    discounting the cosine of a partial match by the share it lacks did better again (a cosine
    slope of its own for every hit sharing words did better still on dev, but scored a memory
    holding every query word below one holding none at cosines above 0.53).
    """
    m, v2 = float(d["ev"] > 0), max(d["cov"], d.get("pcov", 0.0)) ** 2
    return [d["cos"], max(d["cos"], 0.0) * m * (1 - v2), m, v2, d.get("lack", 0.0)]


def _place_floor(z: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """(intercept, cut): 0.45 placed at the dev cut where the larger shortfall from both targets is smallest."""
    cuts = np.unique(z)
    best_cut = min(cuts, key=lambda t: max(0.90 - np.mean(z[right == 1] >= t), np.mean(z[right == 0] >= t) - 0.10))
    below = z[z < best_cut]
    cut = (best_cut + below.max()) / 2 if len(below) else best_cut
    return math.log(FLOOR / (1 - FLOOR)) - cut, cut


# -- features for the score (an experiment: chosen by 5-fold CV on dev, then reported on test) --

_SHIPPED = ("cos", "pcos_partial", "match", "pcov2", "lack")
FEATURE_SETS = {
    "cos, ev, rel (the signals before coverage)": ("cos", "ev", "rel"),
    "cos, ev, rel, cov^2 (the previous map: negative weight on ev)": ("cos", "ev", "rel", "cov2"),
    "cos, cov^2 (monotone, no step)": ("cos", "cov2"),
    "cos, e > 0, cov^2 (the step, monotone past it)": ("cos", "match", "cov2"),
    "+ lacks a name the question asks about": ("cos", "match", "cov2", "lack"),
    "+ a cosine slope for hits sharing words, one for hits sharing none": ("cos_none", "cos_some", "match", "cov2", "lack"),
    "+ the cosine of a partial match discounted by the share it lacks (the map before parts)": ("cos", "cos_partial", "match", "cov2", "lack"),
    "+ a query asking two things: coverage of its best-held question (shipped)": _SHIPPED,
    "+ lacks a rare query word (idf >= 0.75 ln N, any case)": (*_SHIPPED, "rare"),
    "+ lacks the answer type (when: date/time, how much/many: number, who: name)": (*_SHIPPED, "no_type"),
    "+ memory length (log tokens; not shipped, see note)": (*_SHIPPED, "loglen"),
    "+ stand-out, margin, z (query level)": (*_SHIPPED, "standout", "margin", "z"),
    "+ share of query stems held (unweighted)": (*_SHIPPED, "coverage"),
    "+ ranks, both rankers agree": (*_SHIPPED, "log_sem_rank", "log_kw_rank", "both"),
    "+ share of the query's words no memory holds (query level)": (*_SHIPPED, "unseen"),
    "+ share of the query's IDF mass no memory holds (query level)": (*_SHIPPED, "unseen_mass"),
}

_MONTHS_DAYS = (
    "january february march april may june july august september october november december"
    " monday tuesday wednesday thursday friday saturday sunday"
).split()
_TIME_WORDS = _MONTHS_DAYS + (
    "yesterday today tomorrow tonight morning evening night afternoon noon midnight ago since week weeks month"
    " months year years day days daily weekly monthly yearly quarterly spring summer autumn winter am pm hour hours"
).split()
_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand"
    " million dozen half quarter third twice"
).split()


def answer_type(query: str) -> str | None:
    """What an English question's first words ask for: ``date``, ``number``, ``name`` or ``None`` (neutral)."""
    q = query.lower().strip()
    if re.match(r"(when|what time|what date|which (day|date|year|month))\b", q):
        return "date"
    if re.match(r"how (much|many|long|old|far|often|big)\b", q):
        return "number"
    if re.match(r"(who|whom|whose)\b", q) or re.match(r"what (is|was) (the|her|his|their) (name|surname)\b", q):
        return "name"
    return None


def holds_type(kind: str, text: str, query: str) -> bool:
    """Whether ``text`` holds an answer of that kind (a digit or time word; a digit or number word; a
    capitalised word not starting a sentence, not a month or day, not one of the query's words)."""
    if kind == "date":
        return bool(re.search(r"\d|\b(" + "|".join(_TIME_WORDS) + r")\b", text, re.IGNORECASE))
    if kind == "number":
        return bool(re.search(r"\d|\b(" + "|".join(_NUMBER_WORDS) + r")\b", text, re.IGNORECASE))
    asked = {re.sub(r"['’]s$", "", w).lower() for w in re.findall(r"[\w'’-]+", query)}
    start = True
    for t in re.findall(r"[\w'’-]+|[.!?:;\n]", text):
        if t in ".!?:;\n":
            start = True
            continue
        base = re.sub(r"['’]s$", "", t).lower()
        if not start and t[:1].isupper() and base not in asked and base not in _MONTHS_DAYS and base != "i":
            return True
        start = False
    return False


def top1_features(p: dict[int, dict[str, float]], query: str, text: dict[int, str], cal: scoring.Calibration,
                  idfs: dict[str, float], n_rows: int) -> tuple[int, dict[str, float]] | None:  # fmt: skip
    """The shipped hybrid top-1 of a pool and its features given the query, the pool and the query's IDFs."""
    hits = rank_hybrid(p, cal)
    if not hits:
        return None
    k = hits[0][1]
    cos = np.sort([d["cos"] for d in p.values()])[::-1][:POOL]
    by_cos = sorted(p, key=lambda j: -p[j]["cos"])
    by_ev = sorted((j for j in p if p[j]["ev"] > 0), key=lambda j: -p[j]["ev"])
    sr = by_cos.index(k)
    kr = by_ev.index(k) if k in by_ev else POOL
    qst = set(scoring.stems(scoring.keyword_terms(query)).values())
    toks = scoring.tokens([text[k]])[0]
    have = set(toks)
    kind = answer_type(query)
    d = p[k]
    unseen_at = scoring.idf(n_rows, 0) - 1e-9  # a query word no memory holds
    pcov = max(d["cov"], d.get("pcov", 0.0))
    f = {
        "cos": d["cos"], "ev": d["ev"], "rel": d["rel"], "cov2": d["cov"] ** 2, "match": float(d["ev"] > 0),
        "lack": d.get("lack", 0.0), "loglen": math.log(max(len(toks), 1)),
        "cos_none": d["cos"] * (d["ev"] <= 0), "cos_some": d["cos"] * (d["ev"] > 0),
        "cos_partial": max(d["cos"], 0.0) * (d["ev"] > 0) * (1 - d["cov"] ** 2),
        "rare": float(any(w >= 0.75 * math.log(n_rows) for t, w in idfs.items() if t not in have)),
        "no_type": float(kind is not None and not holds_type(kind, text[k], query)),
        "standout": d["cos"] - float(np.median(cos)), "margin": float(cos[0] - cos[1]) if len(cos) > 1 else 0.0,
        "z": (d["cos"] - float(cos.mean())) / (float(cos.std()) + 1e-6),
        "coverage": len(qst & have) / len(qst) if qst else 0.0,
        "pcov2": pcov ** 2, "pcos_partial": max(d["cos"], 0.0) * (d["ev"] > 0) * (1 - pcov ** 2),
        "unseen": sum(w >= unseen_at for w in idfs.values()) / len(idfs) if idfs else 0.0,
        "unseen_mass": sum(w for w in idfs.values() if w >= unseen_at) / sum(idfs.values()) if idfs and sum(idfs.values()) > 0 else 0.0,
        "log_sem_rank": math.log1p(sr), "log_kw_rank": math.log1p(kr), "both": float(sr < 10 and kr < 10),
    }  # fmt: skip
    return k, f


def _fit_floor(x: np.ndarray, right: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The shipped map's fit (:func:`fit`): logistic on top-1s, 0.45 moved to the dev cut; returns x -> score."""
    v = _logistic(x, right.astype(float))
    sc_b, _ = _place_floor(x @ v[:-1], right)
    return lambda z: 1.0 / (1.0 + np.exp(-(z @ v[:-1] + sc_b)))


#: The keyword score map's designs (:func:`keyword_top1_features`), fitted as the hybrid map is.
KEYWORD_FEATURE_SETS = {
    "e alone (the signal before; refitted this way)": ("ev",),
    "e, cov^2": ("ev", "cov2"),
    "e, u^2 (a two-part query's best-held question)": ("ev", "u2"),
    "e, u^2, lacks a name": ("ev", "u2", "lack"),
    "u^2": ("u2",),
    "u^2, lacks a name (shipped: e's weight comes out negative)": ("u2", "lack"),
}


def keyword_top1_features(p: dict[int, dict[str, float]], cal: scoring.Calibration) -> tuple[int, dict[str, float]] | None:
    """The keyword top-1 of a pool (``search``'s) and its features."""
    hits = rank_keyword(p, cal)
    if not hits:
        return None
    d = p[hits[0][1]]
    u2, lack = keyword_feats(d)
    return hits[0][1], {"ev": min(d["ev"], 1.0), "cov2": d["cov"] ** 2, "u2": u2, "lack": lack}


def feature_experiment(dev: list[tuple[int, dict[str, float], bool, bool]], test: list[tuple[int, dict[str, float], bool, bool]],
                       sets: dict[str, tuple[str, ...]] = FEATURE_SETS, title: str = "hybrid score features") -> None:  # fmt: skip
    """For each feature set, fitted as the shipped map is (:func:`_fit_floor`): 5-fold cross-validation on
    dev (5 shuffles; kept / admitted at 0.45 and the best-threshold columns, pooled over folds), then the
    whole-dev fit on test. Features are chosen on the CV columns; test is read once per design."""
    print(f"\n| {title} | dev 5-fold CV: kept / admitted at 0.45 | dev CV: best kept at <= 10% admitted "
          "| dev CV: best admitted at >= 90% kept | test: kept / admitted at 0.45 | test: best kept | test: best admitted |"
          "\n|---|---|---|---|---|---|---|")  # fmt: skip

    def xs(rows: list[tuple[int, dict[str, float], bool, bool]], names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray([[f[n] for n in names] for _, f, r, i in rows if r or i])
        return x, np.asarray([r for _, _, r, i in rows if r or i])

    for name, names in sets.items():
        xd, rd = xs(dev, names)
        cv = []
        for seed in range(5):
            rng = np.random.default_rng(seed)
            fold = np.zeros(len(rd), int)
            for cls in (True, False):
                idx = np.flatnonzero(rd == cls)
                fold[rng.permutation(idx)] = np.arange(len(idx)) % 5
            sc = np.zeros(len(rd))
            for f in range(5):
                sc[fold == f] = _fit_floor(xd[fold != f], rd[fold != f])(xd[fold == f])
            cv.append((np.mean(sc[rd] >= FLOOR), np.mean(sc[~rd] >= FLOOR), *frontier(sc[rd].tolist(), sc[~rd].tolist())))
        ck, ca, cfk, cfa = np.mean(cv, axis=0)
        xt, rt = xs(test, names)
        st = _fit_floor(xd, rd)(xt)
        k, a = frontier(st[rt].tolist(), st[~rt].tolist())
        print(f"| {name} | {ck:.1%} / {ca:.1%} | {cfk:.1%} | {cfa:.1%} | {np.mean(st[rt] >= FLOOR):.1%} / "
              f"{np.mean(st[~rt] >= FLOOR):.1%} | {k:.1%} | {a:.1%} |")  # fmt: skip


# -- the opt-in re-rank stage (memory/_rerank.py) -------------------------------------------


def rerank_rows(emb: Any, query: str, p: dict[int, dict[str, float]], cal: scoring.Calibration,
                text: dict[int, str]) -> tuple[list[tuple[float, int]], list[int], np.ndarray]:  # fmt: skip
    """The hybrid list, its top ``RERANK_DEPTH`` keys and their features ``(c, e, k, m, n)``."""
    from atomic_agents.memory import _rerank

    fused = rank_hybrid(p, cal)
    head = [k for _, k in fused[: _rerank.RERANK_DEPTH]]
    ms = _rerank.signals(emb, query, [text[k] for k in head]) if head else []
    best = max((d["ev"] for d in p.values()), default=0.0)
    feats = [[p[k]["cos"], p[k]["ev"], p[k]["ev"] / best if best > 0 else 0.0, m, n] for k, (m, n) in zip(head, ms, strict=True)]
    return fused, head, np.asarray(feats).reshape(len(head), 5)


def rank_rerank(emb: Any, query: str, p: dict[int, dict[str, float]], cal: scoring.Calibration, text: dict[int, str],
                rcal: Any = None, depth: int | None = None) -> list[tuple[float, int]]:  # fmt: skip
    """The re-rank stage over a pool, exactly as ``search_hybrid(..., rerank=True)`` runs it (``rcal``: other constants)."""
    from atomic_agents.memory import _rerank

    depth = _rerank.RERANK_DEPTH if depth is None else depth
    fused = [(s, k) for s, k in rank_hybrid(p, cal) if s > 0.0]
    saved = dict(_rerank._FITTED)
    if rcal is not None:
        _rerank._FITTED[emb.model_id] = rcal
    try:
        return _rerank.rerank(query, fused, {k: d["cos"] for k, d in p.items()}, {k: d["ev"] for k, d in p.items()}, text, emb, depth)
    finally:
        _rerank._FITTED.clear()
        _rerank._FITTED.update(saved)


#: The stage's constants before two-part questions were matched by their best part (the baseline row).
PREVIOUS_RERANK = ((-0.365, -0.863, -4.795, 15.937, 2.297), -6.524, (6.569, 10.489, -7.145, 23.052, 1.489))


def rank_previous_rerank(emb: Any, query: str, p: dict[int, dict[str, float]], cal: scoring.Calibration,
                         text: dict[int, str], depth: int | None = None) -> list[tuple[float, int]]:  # fmt: skip
    """The stage before two-part matching: every query read as one question, its former constants."""
    from atomic_agents.memory import _rerank

    def one_question(tokens: Sequence[str]) -> list[list[int]]:
        keep = _rerank._content(tokens, range(len(tokens)))
        return [keep or list(range(len(tokens)))]

    score, bias, order = PREVIOUS_RERANK
    saved = _rerank.query_parts
    _rerank.query_parts = one_question  # type: ignore[assignment]
    try:
        return rank_rerank(emb, query, p, cal, text, _rerank.RerankCalibration(score, bias, order), depth)
    finally:
        _rerank.query_parts = saved  # type: ignore[assignment]


def fit_rerank(rows: list[tuple[list[tuple[float, int]], list[int], np.ndarray]], wants: list[set[int]]) -> Any:
    """Dev fit of the re-rank constants: a pairwise ranker over the top-N features (order of ranks 2..N) and
    a logistic P(right) on the hybrid top-1 hits, right against an unanswerable query's (the score),
    its intercept moved as the hybrid map's is (:func:`fit`)."""
    from atomic_agents.memory import _rerank

    pairs = []
    for (_, head, F), want in zip(rows, wants, strict=True):
        pos = [F[i] for i, k in enumerate(head) if k in want]
        neg = [F[i] for i, k in enumerate(head) if k not in want]
        pairs += [a - b for a in pos for b in neg]
    order = _pairwise(np.asarray(pairs))
    x, y = [], []
    for (_, head, F), want in zip(rows, wants, strict=True):
        if head and (head[0] in want or not want):
            x.append(F[0])
            y.append(float(head[0] in want))
    xa, ya = np.asarray(x), np.asarray(y)
    v = _logistic(xa, ya)
    z = xa @ v[:-1]
    best_cut = min(np.unique(z), key=lambda t: max(0.90 - np.mean(z[ya == 1] >= t), np.mean(z[ya == 0] >= t) - 0.10))
    below = z[z < best_cut]
    cut = (best_cut + below.max()) / 2 if len(below) else best_cut
    rcal = _rerank.RerankCalibration(
        score=tuple(round(float(w), 3) for w in v[:-1]), bias=round(float(math.log(FLOOR / (1 - FLOOR)) - cut), 3),  # type: ignore[arg-type]
        order=tuple(round(float(w), 3) for w in order),  # type: ignore[arg-type]
    )  # fmt: skip
    print(f"re-rank constants (score over c, e, k, m, n; order): {rcal}")
    return rcal


def _signals_query_read_again(embedder: Any, query: str, texts: Sequence[str]) -> list[tuple[float, float]]:
    """The stage's ``signals`` before the query's token states were reused: the model reads the query again."""
    from atomic_agents.memory import _rerank

    (q_tokens, q_vecs), *mems = _rerank._token_vectors(embedder, [query, *texts])
    q = _rerank._query_side(q_tokens, q_vecs)
    return [_rerank.maxsim(q, vecs) for _, vecs in mems]


def rerank_latency(store: SQLiteMemoryStore, queries: list[str], reps: int) -> list[tuple[str, str, str, str]]:
    """p50 per query of ``search_hybrid`` with and without ``rerank`` (limit 5), interleaved, at depth 20, 10 and 1,
    and at depth 20 and 1 with the query read by the model again (the stage before it reused the query's pass)."""
    from atomic_agents.memory import _rerank

    saved, signals = _rerank.RERANK_DEPTH, _rerank.signals
    names = ("plain", "rerank 20", "rerank 10", "rerank 1", "again 20", "again 1")
    times: dict[str, list[float]] = {n: [] for n in names}
    try:
        for q in queries[:3]:
            store.search_hybrid(q, SCOPE, limit=5, rerank=True)
        for i in range(reps):
            q = queries[i % len(queries)]
            for name in times:
                _rerank.RERANK_DEPTH = int(name.split()[-1]) if name != "plain" else saved
                _rerank.signals = _signals_query_read_again if name.startswith("again") else signals  # type: ignore[assignment]
                t0 = time.perf_counter()
                store.search_hybrid(q, SCOPE, limit=5, rerank=name != "plain")
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        _rerank.RERANK_DEPTH, _rerank.signals = saved, signals  # type: ignore[assignment]
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [
        (f"search_hybrid + rerank, {n} candidates, p50 per query (ms)", f"{med[f'rerank {n}']:.1f}",
         f"{med['plain']:.1f} plain hybrid (+{med[f'rerank {n}'] - med['plain']:.1f} ms)"
         + (f"; {med[f'again {n}']:.1f} with the query read again (+{med[f'again {n}'] - med['plain']:.1f} ms)" if f"again {n}" in med else ""),
         "report; lead decides (<= 30 ms for 20 candidates)")
        for n in (20, 10, 1)
    ]  # fmt: skip
    return rows


def context_latency(stores: Sequence[tuple[SQLiteMemoryStore, Scope, list[str]]], reps: int) -> list[tuple[str, str, str, str]]:
    """p50 per query of ``search_hybrid`` (limit 5) against the same call without the reply context
    (``_successors`` patched to find none: the hybrid path before it), interleaved, per store."""
    out = []
    for store, scope, queries in stores:
        times: dict[str, list[float]] = {"with": [], "without": []}
        for i in range(reps):
            q = queries[i % len(queries)]
            for name in times:
                if name == "without":
                    store._successors = lambda *_a: {}  # type: ignore[method-assign]
                store._idf_memo = None  # each call asks its query afresh (the first would pay for both)
                t0 = time.perf_counter()
                store.search_hybrid(q, scope, limit=5)
                times[name].append((time.perf_counter() - t0) * 1000)
                store.__dict__.pop("_successors", None)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows = store._read("SELECT count(*) FROM memories")[0][0]
        out.append((f"search_hybrid p50 per query, limit 5 ({rows:,} memories, {scope.agent_id})", f"{med['with']:.2f}",
                    f"{med['without']:.2f} without the reply context ({med['with'] - med['without']:+.2f} ms)", "about as fast"))  # fmt: skip
    return out


def _without_latency(store: SQLiteMemoryStore, queries: list[str], reps: int, attr: str, off: Callable[[str], Any]) -> tuple[float, float]:
    """p50 per query of ``search_hybrid`` (limit 5) with ``_sqlite_keyword.<attr>`` as shipped and patched to
    ``off`` (the hybrid path without that signal), interleaved."""
    from atomic_agents.memory import _sqlite_keyword

    real = getattr(_sqlite_keyword, attr)
    times: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for i in range(reps):
            q = queries[i % len(queries)]
            for name in times:
                setattr(_sqlite_keyword, attr, real if name == "with" else off)
                store._idf_memo = None  # each call asks its query afresh (the first would pay for both)
                t0 = time.perf_counter()
                store.search_hybrid(q, SCOPE, limit=5)
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        setattr(_sqlite_keyword, attr, real)
    return statistics.median(times["with"]), statistics.median(times["without"])


def name_signal_latency(store: SQLiteMemoryStore, queries: list[str], reps: int) -> tuple[str, str, str, str]:
    """``search_hybrid`` against the same call without the name signal (``name_words`` finds no name)."""
    on, off = _without_latency(store, queries, reps, "name_words", lambda _q: frozenset())
    named = sum(1 for q in queries if scoring.name_words(q))
    return (f"search_hybrid p50 per query, limit 5 (ms; {named} of {len(queries)} queries name something)", f"{on:.2f}",
            f"{off:.2f} without the name signal ({on - off:+.2f} ms)", "about as fast")  # fmt: skip


def parts_latency(store: SQLiteMemoryStore, queries: list[str], reps: int) -> tuple[str, str, str, str]:
    """``search_hybrid`` on the queries that ask two things, against the same call reading no questions
    (``query_parts`` finds none: the score's coverage is the whole query's)."""
    two = [q for q in queries if scoring.query_parts(q)]
    on, off = _without_latency(store, two, reps, "query_parts", lambda *_a: [])
    return (f"search_hybrid p50 per query, limit 5 (ms; the {len(two)} queries asking two things)", f"{on:.2f}",
            f"{off:.2f} without reading their questions ({on - off:+.2f} ms)", "about as fast")  # fmt: skip


def held_latency(store: SQLiteMemoryStore, queries: list[str], reps: int) -> list[tuple[str, str, str, str]]:
    """``search`` and ``recall`` (limit 10) against the same calls reading none of the hits' words
    (``held_signals`` patched to say nothing is held), interleaved: the cost of scoring what each hit holds."""
    from atomic_agents.memory import _base

    real = _base.held_signals
    blank = lambda _q, _i, texts: [(0.0, False)] * len(texts)  # noqa: E731
    out = []
    for name, call in (("search", store.search), ("recall", store.recall)):
        times: dict[str, list[float]] = {"with": [], "without": []}
        try:
            for i in range(reps):
                q = queries[i % len(queries)]
                for key in times:
                    _base.held_signals = real if key == "with" else blank  # type: ignore[assignment]
                    store._idf_memo = None  # each call asks its query afresh (the first would pay for both)
                    t0 = time.perf_counter()
                    call(q, SCOPE, limit=10)
                    times[key].append((time.perf_counter() - t0) * 1000)
        finally:
            _base.held_signals = real  # type: ignore[assignment]
        on, off = statistics.median(times["with"]), statistics.median(times["without"])
        out.append((f"{name} p50 per query, limit 10 (ms), scoring what each hit holds of the query", f"{on:.2f}",
                    f"{off:.2f} reading no hit's words ({on - off:+.2f} ms)", "about as fast"))  # fmt: skip
    return out


@contextlib.contextmanager
def no_word_forms(*stores: SQLiteMemoryStore) -> Iterator[None]:
    """Searches as before word forms: each query word matched in its own form only (an empty forms table)."""
    real = _words._entry
    _words._entry = lambda _stem: None  # type: ignore[assignment]
    for st in stores:
        st._idf_memo = None
    try:
        yield
    finally:
        _words._entry = real  # type: ignore[assignment]
        for st in stores:
            st._idf_memo = None


def forms_latency(store: SQLiteMemoryStore, queries: list[str], reps: int) -> list[tuple[str, str, str, str]]:
    """``search`` and ``search_hybrid`` on the queries with a word in another form, against the same calls
    matching each word in its own form only (:func:`no_word_forms`), interleaved."""
    some = [q for q in queries if len(scoring.match_terms(q)) > len(scoring.keyword_terms(q))]
    out = []
    for name, call in (("search", store.search), ("search_hybrid", store.search_hybrid)):
        times: dict[str, list[float]] = {"with": [], "without": []}
        for i in range(reps):
            q = some[i % len(some)]
            for key in times:
                with contextlib.nullcontext() if key == "with" else no_word_forms(store):
                    store._idf_memo = None
                    t0 = time.perf_counter()
                    call(q, SCOPE, limit=10)
                    times[key].append((time.perf_counter() - t0) * 1000)
        on, off = statistics.median(times["with"]), statistics.median(times["without"])
        out.append((f"{name} p50 per query, limit 10 (ms; the {len(some)} of {len(queries)} queries with a word in other forms)",
                    f"{on:.2f}", f"{off:.2f} matching each word in its own form ({on - off:+.2f} ms)", "about as fast"))  # fmt: skip
    return out


# -- keyword rank-first latency -------------------------------------------------------------


def latency(n: int, reps: int, tmp: Path) -> list[tuple[str, str, str, str]]:
    """Keyword search p50 at ``n`` rows (3 scopes) vs raw FTS5 top-10 and the previous full join;
    ``search_hybrid`` p50 and its FTS5 pass (one MATCH per word, for coverage) vs the one-OR-query pass.

    Synthetic rows (18 Zipf-distributed words, 384-d fake vectors), written through the store.
    """
    rnd = random.Random(8)
    vocab = [f"w{i}" for i in range(3000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    # 384-d vectors, as the default model's: rows as wide as real ones, so a join pays real page reads
    store = SQLiteMemoryStore(tmp / f"lat{n}.db", embedder=HashingEmbedder(dimension=384), durable=False)
    scopes = [Scope("lat", f"u{i}") for i in range(3)]
    for start in range(0, n, 5000):
        for sc in scopes:
            texts = [" ".join(rnd.choices(vocab, weights, k=18)) for _ in range(min(5000, n - start) // 3)]
            store.remember_many([(t, None) for t in texts], sc)
    queries = [" ".join(rnd.choices(vocab[5:60], k=2) + rnd.choices(vocab[200:2000], k=2)) for _ in range(50)]
    conn = store._conn
    cols = "m.seq, m.id, m.content, m.metadata, m.agent_id, m.user_id, m.org_id, m.workspace_id, m.created_at, m.updated_at, m.expires_at, m.deleted_at"

    def raw(q: str) -> None:
        conn.execute("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts) LIMIT 10",
                     [scoring.fts_query(q, forms=True)]).fetchall()  # fmt: skip

    def full_join(q: str) -> None:
        conn.execute(
            f"SELECT {cols}, bm25(memories_fts) FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid"
            " WHERE memories_fts MATCH ? AND m.agent_id = ? AND m.user_id = ? AND m.org_id = ? AND m.workspace_id = ?"
            " AND m.deleted_at = 0 AND (m.expires_at IS NULL OR m.expires_at > ?) ORDER BY bm25(memories_fts) LIMIT 10",
            [scoring.fts_query(q, forms=True), *scopes[1].key(), time.time()],
        ).fetchall()

    def ours(q: str) -> None:
        store.search(q, scopes[1], 10)

    def or_pass(q: str) -> Matches:
        """The hybrid FTS5 pass before coverage: one OR query, bm25 only."""
        got = dict(conn.execute("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?",
                                [scoring.fts_query(q, forms=True)]).fetchall())  # fmt: skip
        return Matches(got, [], sum(store._idf(q).values()))

    real_matches = store._matches

    def hybrid(q: str) -> None:
        store.search_hybrid(q, scopes[1], None, 10)

    def hybrid_or_pass(q: str) -> None:
        store._matches = or_pass  # type: ignore[method-assign]
        try:
            store.search_hybrid(q, scopes[1], None, 10)
        finally:
            store._matches = real_matches  # type: ignore[method-assign]

    times: dict[str, list[float]] = {"raw": [], "join": [], "ours": [], "hybrid": [], "hybrid_or": [], "per_word": [], "or": []}
    fns = {"raw": raw, "join": full_join, "ours": ours, "hybrid": hybrid, "hybrid_or": hybrid_or_pass,
           "per_word": real_matches, "or": or_pass}  # fmt: skip
    for q in queries[:3]:
        for f in fns.values():
            f(q)
    for i in range(reps):
        q = queries[i % len(queries)]
        for name, f in fns.items():  # interleaved
            t0 = time.perf_counter()
            f(q)
            times[name].append((time.perf_counter() - t0) * 1000)
    med = {k: statistics.median(v) for k, v in times.items()}
    n_match = conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", [scoring.fts_query(queries[0], forms=True)]).fetchone()[0]
    store.close()
    return [
        (f"keyword search p50 at {n:,} (ms; ~{n_match:,} matches/query)", f"{med['ours']:.1f}",
         f"{med['raw']:.1f} raw FTS5 top-10 ({med['ours'] / med['raw']:.2f}x); {med['join']:.1f} previous full join", "<= 1.5x raw"),
        (f"search_hybrid p50 at {n:,} (ms; fake 384-d embedder)", f"{med['hybrid']:.1f}",
         f"{med['hybrid_or']:.1f} with the previous FTS5 pass (one OR query, no coverage) ({med['hybrid'] / med['hybrid_or']:.2f}x)", "-"),
        (f"hybrid FTS5 pass at {n:,} (ms): one MATCH per word, bm25 + coverage", f"{med['per_word']:.1f}",
         f"{med['or']:.1f} one OR query, bm25 only ({med['per_word'] / med['or']:.2f}x)", "-"),
    ]  # fmt: skip


# -- the run --------------------------------------------------------------------------------


def _print_table(results: dict[str, dict[str, Any]]) -> None:
    print("| ranker | recall@5 | recall@10 | MRR | top-1 right kept at 0.45 | irrelevant admitted at 0.45 "
          "| best threshold: kept at <= 10% admitted | best threshold: admitted at >= 90% kept |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, m in results.items():
        fk, fa = m["frontier"]
        print(f"| {name} | {m['r5']:.3f} | {m['r10']:.3f} | {m['mrr']:.3f} | {m['kept']:.1%} | {m['admitted']:.1%} | {fk:.1%} | {fa:.1%} |")


def run(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_memory.py --section quality")
    ap.add_argument("--split", default="test", choices=["dev", "test", "all"])
    ap.add_argument("--fit", action="store_true", help="fit the calibration on the dev split and print it")
    ap.add_argument("--latency", type=int, default=0, help="also time keyword rank-first and search_hybrid at this many rows")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--rerank-reps", type=int, default=60, help="queries timed for the re-rank latency rows")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.fit and args.split != "dev":
        ap.error("--fit uses the dev split only: add --split dev")
    corpus, queries = _load(None if args.split == "all" else args.split)
    with tempfile.TemporaryDirectory() as tmp:
        emb = default_embedder()
        store = SQLiteMemoryStore(Path(tmp) / "eval.db", embedder=emb, durable=False)
        t0 = time.perf_counter()
        ids = store.remember_many([(c["content"], c["metadata"]) for c in corpus], SCOPE)
        seq_of = dict(store._read("SELECT id, seq FROM memories"))
        by_cid = {c["id"]: seq_of[mid] for c, mid in zip(corpus, ids, strict=True)}
        print(f"\n## retrieval quality: {len(corpus)} memories, {len(queries)} {args.split} queries, {emb.model_id} "
              f"(ingest {time.perf_counter() - t0:.0f} s)\n")  # fmt: skip
        wants = [{by_cid[r] for r in q["relevant"]} for q in queries]
        kinds = [q["kind"] for q in queries]
        src_of = {by_cid[c["id"]]: c["source"] for c in corpus}
        text_of = {by_cid[c["id"]]: c["content"] for c in corpus}
        sources = [{src_of[k] for k in w} for w in wants]
        pools = [pool_of(store, q["query"]) for q in queries]
        cal = scoring.calibration_for(emb)
        t0 = time.perf_counter()
        lc = _mem_longconv.build(emb, Path(tmp), None if args.split == "all" else args.split, pool_of)
        print(f"long conversations: {len(lc.stores)} stores, {lc.turns} turns, {len(lc.queries)} {args.split} questions "
              f"(ingest {time.perf_counter() - t0:.0f} s)\n")  # fmt: skip
        if args.fit:
            print("-- the shipped ranking constants kept (the name weight chosen on them):")
            kept = fit(pools, wants, lc.pools, lc.wants, ranking=scoring.DEFAULT)
            print(f"fitted over the shipped ranking: {kept}\n\n-- everything refitted:")
            cal = fit(pools, wants, lc.pools, lc.wants)
            print(f"fitted: {cal}\n")
        # the blend baseline's weight: tuned on dev
        dev_alpha = BLEND_ALPHA
        if args.split == "dev" or args.fit:
            dev_alpha = max((a / 20 for a in range(21)), key=lambda a: metrics([make_blend(a)(p, cal) for p in pools], wants, kinds)["r5"])
        rcal = None
        if args.fit:
            rcal = fit_rerank([rerank_rows(emb, q["query"], p, cal, text_of) for q, p in zip(queries, pools, strict=True)], wants)
            import _mem_rerank_designs as designs  # bench/_mem_rerank_designs.py: the score designs tried for the stage

            designs.print_cv(designs.top1_rows(emb, store, queries, wants, pools, cal, text_of, rank_hybrid))
        rerank_lists = [rank_rerank(emb, q["query"], p, cal, text_of, rcal) for q, p in zip(queries, pools, strict=True)]
        rankers = {
            "keyword (search)": rank_keyword,
            "keyword, score map before it read coverage (evidence alone)": rank_keyword_before,
            "semantic (recall)": rank_semantic,
            "semantic, score before it read the hit's words (the cosine alone)": rank_semantic_before,
            "hybrid (search_hybrid)": rank_hybrid,
            "hybrid, GENERIC's score map (the ranking key)": lambda p, c: rank_hybrid(p, replace(c, **GENERIC_SCORE_MAP)),
            "hybrid before the score read a two-part question's parts (previous score map)": rank_before_parts,
            "hybrid without the reply context (hy_ctx = 0, no successors in the pool)": rank_no_context,
            "hybrid before the name term in the ranking (hy_n = 0)": lambda p, c: rank_hybrid(p, replace(c, hy_n=0.0)),
            "hybrid before the long conversations (previous constants, no context)": rank_previous_constants,
            "previous hybrid (max + bonus)": rank_previous,
            f"convex blend, alpha={dev_alpha:.2f} (baseline)": make_blend(dev_alpha),
        }
        results = {name: metrics([f(p, cal) for p in pools], wants, kinds, sources) for name, f in rankers.items()}
        with no_word_forms(store):  # the pools as they were before word forms (buy/bought apart)
            plain = [pool_of(store, q["query"]) for q in queries]
        for name, f in (("keyword before word forms (each word in its own form)", rank_keyword),
                        ("hybrid before word forms (each word in its own form)", rank_hybrid)):  # fmt: skip
            results[name] = metrics([f(p, cal) for p in plain], wants, kinds, sources)
        results["hybrid + rerank (opt-in, top 20 re-read)"] = metrics(rerank_lists, wants, kinds, sources)
        results["hybrid + rerank of the top-1 only (score, same order)"] = metrics(
            [rank_rerank(emb, q["query"], p, cal, text_of, rcal, 1) for q, p in zip(queries, pools, strict=True)], wants, kinds, sources)  # fmt: skip
        results["previous rerank stage (one question per query, its constants; top 20)"] = metrics(
            [rank_previous_rerank(emb, q["query"], p, cal, text_of) for q, p in zip(queries, pools, strict=True)], wants, kinds, sources)  # fmt: skip
        if not args.fit:  # the pools mirror the store: check the public calls agree with them
            for q, p, rl in list(zip(queries, pools, rerank_lists, strict=True))[:20]:
                kw_api = [(store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0], round(h.score, 9))
                          for h in store.search(q["query"], SCOPE, limit=10)]  # fmt: skip
                assert kw_api == [(k, round(sc, 9)) for sc, k in rank_keyword(p, cal)[:10]], (q["query"], kw_api)
                sem_api = [(store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0], round(h.score, 9))
                           for h in store.recall(q["query"], SCOPE, limit=10)]  # fmt: skip
                assert sem_api == [(k, round(sc, 9)) for sc, k in rank_semantic(p, cal)[:10]], (q["query"], sem_api)
                api = [store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0] for h in store.search_hybrid(q["query"], SCOPE, limit=10)]
                mine = [k for _, k in rank_hybrid(p, cal)[:10]]
                assert api == mine, (q["query"], api, mine)
                got = store.search_hybrid(q["query"], SCOPE, limit=10, rerank=True)
                api_r = [(store._read("SELECT seq FROM memories WHERE id = ?", [h.id])[0][0], round(h.score, 9)) for h in got]
                assert api_r == [(k, round(sc, 9)) for sc, k in rl[:10]], (q["query"], api_r, rl[:10])
        _print_table(results)
        best_single = max(results["keyword (search)"]["r5"], results["semantic (recall)"]["r5"])
        gain = results["hybrid (search_hybrid)"]["r5"] - best_single
        print(f"\nhybrid recall@5 minus the best single ranker: {gain * 100:+.1f} points (target >= +5); "
              f"{results['hybrid (search_hybrid)']['n']} answerable, {results['hybrid (search_hybrid)']['irr']} irrelevant queries\n")  # fmt: skip
        kind_names = sorted({k for m in results.values() for k in m["kinds"]})
        print("| recall@5 by kind | " + " | ".join(f"{k} ({kinds.count(k)})" for k in kind_names) + " |")
        print("|---|" + "---|" * len(kind_names))
        for name, m in results.items():
            print(f"| {name} | " + " | ".join(f"{m['kinds'].get(k, 0.0):.3f}" for k in kind_names) + " |")
        src_names = sorted({k for m in results.values() for k in m["sources"]})
        print("\n| recall@10 by target's source | " + " | ".join(src_names) + " |")
        print("|---|" + "---|" * len(src_names))
        for name, m in results.items():
            print(f"| {name} | " + " | ".join(f"{m['sources'].get(k, 0.0):.3f}" for k in src_names) + " |")
        if lc.queries:
            lc_results = {name: metrics([f(p, cal) for p in lc.pools], lc.wants, lc.kinds) for name, f in rankers.items()}
            with no_word_forms(*lc.stores):
                lc_plain = [pool_of(lc.stores[n], q, scope=_mem_longconv.SCOPE) for q, n in zip(lc.queries, lc.store_of, strict=True)]
            for name, f in (("keyword before word forms (each word in its own form)", rank_keyword),
                            ("hybrid before word forms (each word in its own form)", rank_hybrid)):  # fmt: skip
                lc_results[name] = metrics([f(p, cal) for p in lc_plain], lc.wants, lc.kinds)
            lc_results["hybrid + rerank (opt-in, top 20 re-read)"] = metrics(
                [rank_rerank(emb, q, p, cal, t, rcal) for q, p, t in zip(lc.queries, lc.pools, lc.texts, strict=True)], lc.wants, lc.kinds)  # fmt: skip
            print(f"\n## long conversations (bench/data/longconv): one store per conversation, {lc.turns} turns, "
                  f"{len(lc.queries)} {args.split} questions; turn recall\n")  # fmt: skip
            _print_table(lc_results)
            kind_names = sorted({k for m in lc_results.values() for k in m["kinds"]})
            print("\n| long conversations: recall@10 by kind | " + " | ".join(f"{k} ({lc.kinds.count(k)})" for k in kind_names) + " |")
            print("|---|" + "---|" * len(kind_names))
            for name, m in lc_results.items():
                print(f"| {name} | " + " | ".join(f"{m['kinds10'].get(k, 0.0):.3f}" for k in kind_names) + " |")
            if not args.fit:
                lc.check_api(cal, rank_hybrid)
                print("\n| metric | atomic-agents | baseline (same run) | target |\n|---|---|---|---|")
                for row in _mem_longconv.shared_store_rows(emb, Path(tmp), None if args.split == "all" else args.split):
                    print("| " + " | ".join(row) + " |", flush=True)
        if args.split == "test" and not args.fit:
            _, dev_q = _load("dev")
            dev_wants = [{by_cid[r] for r in q["relevant"]} for q in dev_q]

            def rows(qs: list[dict[str, Any]], ws: list[set[int]], ps: list[dict[int, dict[str, float]]]) -> list[tuple[int, dict[str, float], bool, bool]]:
                out = []
                for q, w, p in zip(qs, ws, ps, strict=True):
                    got = top1_features(p, q["query"], text_of, cal, store._idf(q["query"]), len(corpus))
                    if got:
                        out.append((got[0], got[1], got[0] in w, not w))
                return out

            dev_pools = [pool_of(store, q["query"]) for q in dev_q]
            feature_experiment(rows(dev_q, dev_wants, dev_pools), rows(queries, wants, pools))

            def kw_rows(ws: list[set[int]], ps: list[dict[int, dict[str, float]]]) -> list[tuple[int, dict[str, float], bool, bool]]:
                return [(got[0], got[1], got[0] in w, not w) for w, p in zip(ws, ps, strict=True) if (got := keyword_top1_features(p, cal))]

            feature_experiment(kw_rows(dev_wants, dev_pools), kw_rows(wants, pools), KEYWORD_FEATURE_SETS, "keyword score features")
            import _mem_rerank_designs as designs  # bench/_mem_rerank_designs.py: the score designs tried for the stage

            designs.print_test(designs.top1_rows(emb, store, dev_q, dev_wants, dev_pools, cal, text_of, rank_hybrid),
                               designs.top1_rows(emb, store, queries, wants, pools, cal, text_of, rank_hybrid))  # fmt: skip
        print(f"\nre-rank latency (load {open('/proc/loadavg').read().split()[0]}), interleaved, limit 5:\n")
        print("| metric | atomic-agents | baseline (same run) | target |\n|---|---|---|---|")
        for row in rerank_latency(store, [q["query"] for q in queries], args.rerank_reps):
            print("| " + " | ".join(row) + " |", flush=True)
        print("| " + " | ".join(name_signal_latency(store, [q["query"] for q in queries], 4 * len(queries))) + " |", flush=True)
        print("| " + " | ".join(parts_latency(store, [q["query"] for q in queries], 4 * len(queries))) + " |", flush=True)
        for row in held_latency(store, [q["query"] for q in queries], 2 * len(queries)):
            print("| " + " | ".join(row) + " |", flush=True)
        for row in forms_latency(store, [q["query"] for q in queries], 2 * len(queries)):
            print("| " + " | ".join(row) + " |", flush=True)
        timed = [(store, SCOPE, [q["query"] for q in queries])]
        if lc.stores:
            timed.append((lc.stores[0], _mem_longconv.SCOPE, [q for q, n in zip(lc.queries, lc.store_of, strict=True) if n == 0]))
        for row in context_latency(timed, 2 * len(queries)):
            print("| " + " | ".join(row) + " |", flush=True)
        store.close()
        lc.close()
        if args.latency:
            print("\n| metric | atomic-agents | baseline (same run) | target |\n|---|---|---|---|")
            for row in latency(args.latency, args.reps, Path(tmp)):
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    run()

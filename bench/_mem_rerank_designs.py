"""Score designs for the re-rank stage's top-1 (``memory/_rerank.py``): what was tried to meet the floor, and how it carried.

Run by ``bench/bench_memory.py --section quality``: with ``--split dev --fit`` it prints each design's
5-fold cross-validation on dev; on the test split it fits each design on all of dev, places its
cut on dev, and applies it to test once (nothing is tuned on test). The floor targets: of the
queries whose hybrid top-1 is right, >= 90% keep a score >= 0.45; of the unanswerable queries,
<= 10% are admitted. Every design scores the *hybrid* top-1 (the stage keeps it first), so only
the score map differs between rows.

Features of a (query, memory) pair, from the bundled model's token states of both:

- ``c, e, k, v2``: cosine, keyword evidence, relative evidence, squared keyword coverage (``_scoring``);
- ``m, n``: mean and min over the query's content tokens of their best cosine in the memory (the shipped stage);
- ``mi, ni``: the same per query *word* (mean over its WordPiece pieces, words mapped through the
  tokenizer's word ids), ``mi`` weighted by the word's IDF in the store's own FTS5 statistics (``_idf``);
- ``miss60``: the IDF-weighted share of query words whose best match is below 0.6 (the part of the
  question the memory does not address);
- ``rare2``: the weaker of the two highest-IDF words' best matches;
  ``mil, nil, rare2l``: the same with a word whose stem the memory holds counted as matched (1.0);
- ``memcov``: the mean over the memory's tokens of their best cosine in the query (how much of the
  memory the query covers); ``loglen``: log(1 + the memory's token count);
- ``mp, np``: ``m, n`` of the best-matched question of a query that asks two things
  (``... and how was it fixed?``; ``_rerank.query_parts``): what the stage now computes;
- ``gm4``: a soft minimum (power mean, p = -4) of the word matches; ``resid``: cosine between the
  memory's pooled vector and the query's token states pooled with weight (1 - best match) (what
  of the question is left once matched tokens are taken out).

Models: an L2 logistic on standardised features (P(top-1 right) against an unanswerable query's
top-1), the same with pairwise interactions, and gradient-boosted stumps (numpy, 100 rounds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from atomic_agents.memory import _rerank
from atomic_agents.memory import _scoring as scoring
from atomic_agents.memory._embed import _normalise

_CONTENT = re.compile(r"\w", re.UNICODE)

Row = tuple[dict[str, float], bool]  # (features, right); rows are right top-1s or unanswerable queries' top-1s


def _states(emb: Any, text: str) -> tuple[list[str], list[int | None], list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Tokens, word ids, offsets, unit token states ([CLS]/[SEP] dropped) and the pooled sentence vector of one text."""
    emb._load()
    hidden, mask, encs = emb._hidden([text], emb._load(False))
    n = int(mask[0].sum())
    e = encs[0]
    pooled = hidden[0, :n].mean(0)
    return list(e.tokens[1 : n - 1]), list(e.word_ids[1 : n - 1]), list(e.offsets[1 : n - 1]), hidden[0, 1 : n - 1], pooled / (np.linalg.norm(pooled) + 1e-12)


def pair_features(emb: Any, query: str, text: str, d: dict[str, float], idfs: dict[str, float], n_rows: int) -> dict[str, float]:
    """Every design's features of one (query, memory) pair; ``d`` holds the hybrid signals (``cos, ev, rel, cov``)."""
    qt, qw, qo, q_raw, _ = _states(emb, query)
    mt, _, _, m_raw, m_pooled = _states(emb, text)
    q_unit, m_unit = _normalise(q_raw), _normalise(m_raw)
    S = q_unit @ m_unit.T if len(m_unit) else np.zeros((len(q_unit), 1), np.float32)
    best = S.max(axis=1)
    keep = [i for i, t in enumerate(qt) if _CONTENT.match(t) and t.lower() not in scoring._STOPWORDS]
    b_old = best[keep] if keep else best
    f = {"c": d["cos"], "e": d["ev"], "k": d["rel"], "v2": d["cov"] ** 2, "m": float(b_old.mean()), "n": float(b_old.min())}
    spans: dict[int, list[int]] = {}
    for i, w in enumerate(qw):
        if w is not None:
            spans.setdefault(w, []).append(i)
    words = []  # (token indices, idf, stem)
    stem_of = scoring.stems([query[qo[idx[0]][0] : qo[idx[-1]][1]].lower() for idx in spans.values()])
    held = set(scoring.tokens([text])[0])
    for idx in spans.values():
        word = query[qo[idx[0]][0] : qo[idx[-1]][1]]
        if not _CONTENT.match(word) or word.lower() in scoring._STOPWORDS:
            continue
        st = stem_of.get(word.lower())
        w = idfs.get(st, scoring.idf(n_rows, 0)) if st else 0.0
        words.append((idx, w, st))
    if not words:
        words = [(list(range(len(qt))), 1.0, None)]
    bw = np.array([best[idx].mean() for idx, _, _ in words])
    w = np.array([x[1] for x in words]) + 1e-9
    lex = np.array([1.0 if st is not None and st in held else 0.0 for _, _, st in words])
    bl = np.maximum(bw, lex)
    rare = np.argsort(-w)[:2]
    f.update(
        mi=float((w * bw).sum() / w.sum()), ni=float(bw.min()), miss60=float((w * (bw < 0.6)).sum() / w.sum()),
        rare2=float(bw[rare].min()), mil=float((w * bl).sum() / w.sum()), nil=float(bl.min()), rare2l=float(bl[rare].min()),
        memcov=float(S.max(axis=0).mean()), loglen=math.log1p(len(mt)),
        gm4=float(np.mean(np.clip(bw, 0.05, 1.0) ** -4.0) ** -0.25),
    )  # fmt: skip
    f["mp"], f["np"] = _rerank._best_part(best, _rerank.query_parts(qt))  # two-part questions: the best-matched part
    idx_all = np.concatenate([np.asarray(idx) for idx, _, _ in words])
    soft = np.clip(1.0 - best[idx_all], 0.0, None)
    resid = (q_raw[idx_all] * soft[:, None]).sum(0)
    f["resid"] = float(resid @ m_pooled / (np.linalg.norm(resid) + 1e-12))
    return f


def top1_rows(emb: Any, store: Any, queries: Sequence[dict[str, Any]], wants: Sequence[set[int]],
              pools: Sequence[dict[int, dict[str, float]]], cal: Any, text: dict[int, str], rank: Callable[..., Any]) -> list[Row]:  # fmt: skip
    """Features of each query's hybrid top-1, for queries whose top-1 is right or that have no answer."""
    n_rows = int(store._read("SELECT count(*) FROM memories")[0][0])
    out = []
    for q, want, p in zip(queries, wants, pools, strict=True):
        hits = rank(p, cal)
        if not hits:
            continue
        k = hits[0][1]
        if k in want or not want:
            out.append((pair_features(emb, q["query"], text[k], p[k], store._idf(q["query"]), n_rows), k in want))
    return out


# -- models ------------------------------------------------------------------------------------


def _logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 60) -> np.ndarray:
    X = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        step = np.linalg.solve((X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w)), X.T @ (p - y) + l2 * np.r_[w[:-1], 0.0])
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def fit_logistic(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    mu, sd = x.mean(0), x.std(0) + 1e-9
    w = _logistic((x - mu) / sd, y.astype(float))
    return lambda z: ((z - mu) / sd) @ w[:-1]


def fit_stumps(x: np.ndarray, y: np.ndarray, rounds: int = 100, lr: float = 0.1) -> Callable[[np.ndarray], np.ndarray]:
    """Gradient-boosted stumps on the logistic loss (Newton leaf values, thresholds at 19 quantiles)."""
    F, yy, model = np.zeros(len(y)), y.astype(float), []
    cuts = [np.unique(np.quantile(x[:, j], np.linspace(0.05, 0.95, 19))) for j in range(x.shape[1])]
    for _ in range(rounds):
        p = 1.0 / (1.0 + np.exp(-F))
        g, h = yy - p, p * (1 - p) + 1e-6
        best: tuple[float, int, float, float, float] | None = None
        for j in range(x.shape[1]):
            for t in cuts[j]:
                left = x[:, j] <= t
                gl, hl, gr, hr = g[left].sum(), h[left].sum(), g[~left].sum(), h[~left].sum()
                gain = gl * gl / (hl + 1) + gr * gr / (hr + 1)
                if best is None or gain > best[0]:
                    best = (gain, j, float(t), gl / (hl + 1), gr / (hr + 1))
        assert best is not None
        _, j, t, a, b = best
        model.append((j, t, lr * a, lr * b))
        F += np.where(x[:, j] <= t, lr * a, lr * b)
    return lambda z: np.sum([np.where(z[:, j] <= t, a, b) for j, t, a, b in model], axis=0)


B = ["c", "e", "k"]
#: name -> (features, pairwise interactions, model)
DESIGNS: dict[str, tuple[list[str], list[tuple[str, str]], Callable[..., Any]]] = {
    "hybrid signals only (c, e, k, v2)": (B + ["v2"], [], fit_logistic),
    "the shipped stage's features (c, e, k, m, n), refit": (B + ["m", "n"], [], fit_logistic),
    "+ v2 (keyword coverage)": (B + ["v2", "m", "n"], [], fit_logistic),
    "IDF-weighted word maxsim (c, e, k, mi, ni)": (B + ["mi", "ni"], [], fit_logistic),
    "+ IDF share of unaddressed words (miss60)": (B + ["mi", "ni", "miss60"], [], fit_logistic),
    "+ weakest of the two rarest words (rare2)": (B + ["mi", "ni", "rare2"], [], fit_logistic),
    "lexical match counts as matched (mil, nil, rare2l)": (B + ["mil", "nil", "rare2l"], [], fit_logistic),
    "shipped + memory side (memcov, loglen)": (B + ["m", "n", "memcov", "loglen"], [], fit_logistic),
    "shipped + soft min, residual (gm4, resid)": (B + ["m", "n", "gm4", "resid"], [], fit_logistic),
    "two-part questions: the best part's m, n (the stage now)": (B + ["mp", "np"], [], fit_logistic),
    "the stage now + v2": (B + ["v2", "mp", "np"], [], fit_logistic),
    "shipped + interactions (c n, e n, n^2)": (B + ["m", "n"], [("c", "n"), ("e", "n"), ("n", "n")], fit_logistic),
    "boosted stumps over the shipped features": (B + ["m", "n"], [], fit_stumps),
    "boosted stumps over every feature": (B + ["v2", "m", "n", "mi", "ni", "miss60", "rare2", "memcov", "loglen", "gm4", "resid"], [], fit_stumps),
    "logistic over every feature": (B + ["v2", "m", "n", "mi", "ni", "miss60", "rare2", "memcov", "loglen", "gm4", "resid"], [], fit_logistic),
}


def _xy(rows: Sequence[Row], names: list[str], inter: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray([[f[n] for n in names] + [f[a] * f[b] for a, b in inter] for f, _ in rows])
    return x, np.asarray([r for _, r in rows])


def _cut(z: np.ndarray, right: np.ndarray) -> float:
    """The dev cut (as ``fit``/``fit_rerank`` place 0.45): where the larger shortfall from both targets is smallest."""
    best = min(np.unique(z), key=lambda t: (max(0.90 - np.mean(z[right] >= t), np.mean(z[~right] >= t) - 0.10), -t))
    below = z[z < best]
    return float((best + below.max()) / 2) if len(below) else float(best)


def _frontier(z: np.ndarray, right: np.ndarray) -> float:
    """Kept at the best threshold admitting <= 10%."""
    return max(float(np.mean(z[right] >= t)) for t in np.r_[z, np.inf] if np.mean(z[~right] >= t) <= 0.10)


def cross_validate(rows: Sequence[Row], design: str, folds: int = 5, seeds: Sequence[int] = (0, 1, 2)) -> tuple[float, float, float]:
    """Mean over seeds of 5-fold CV (stratified): (kept, admitted) at each training fold's cut, and best-threshold kept."""
    names, inter, fitter = DESIGNS[design]
    x, y = _xy(rows, names, inter)
    kept, adm, front = [], [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        fold = np.empty(len(y), int)
        for cls in (True, False):
            idx = np.where(y == cls)[0]
            rng.shuffle(idx)
            fold[idx] = np.arange(len(idx)) % folds
        z = np.empty(len(y))
        for f in range(folds):
            tr = fold != f
            g = fitter(x[tr], y[tr])
            z[~tr] = g(x[~tr]) - _cut(g(x[tr]), y[tr])
        kept.append(np.mean(z[y] >= 0))
        adm.append(np.mean(z[~y] >= 0))
        front.append(_frontier(z, y))
    return float(np.mean(kept)), float(np.mean(adm)), float(np.mean(front))


def on_test(dev: Sequence[Row], test: Sequence[Row], design: str) -> tuple[float, float, float]:
    """Fit on all of dev, cut placed on dev, applied to test once: (kept, admitted, best-threshold kept)."""
    names, inter, fitter = DESIGNS[design]
    xd, yd = _xy(dev, names, inter)
    g = fitter(xd, yd)
    cut = _cut(g(xd), yd)
    xt, yt = _xy(test, names, inter)
    z = g(xt) - cut
    return float(np.mean(z[yt] >= 0)), float(np.mean(z[~yt] >= 0)), _frontier(z, yt)


def print_cv(dev: Sequence[Row]) -> None:
    print(f"\n| re-rank score design (top-1 of hybrid; dev: {sum(r for _, r in dev)} right, {sum(not r for _, r in dev)} unanswerable) "
          "| 5-fold CV on dev: kept | admitted | best threshold: kept at <= 10% admitted |\n|---|---|---|---|")  # fmt: skip
    for name in DESIGNS:
        k, a, fr = cross_validate(dev, name)
        print(f"| {name} | {k:.1%} | {a:.1%} | {fr:.1%} |", flush=True)


def print_test(dev: Sequence[Row], test: Sequence[Row]) -> None:
    print(f"\n| re-rank score design (fit and cut on dev, applied to test once; {sum(r for _, r in test)} right, "
          f"{sum(not r for _, r in test)} unanswerable) | test: kept | admitted | best threshold: kept at <= 10% admitted "
          "| dev CV: kept / admitted |\n|---|---|---|---|---|")  # fmt: skip
    for name in DESIGNS:
        k, a, fr = on_test(dev, test, name)
        ck, ca, _ = cross_validate(dev, name)
        print(f"| {name} | {k:.1%} | {a:.1%} | {fr:.1%} | {ck:.1%} / {ca:.1%} |", flush=True)


__all__ = ["DESIGNS", "cross_validate", "on_test", "pair_features", "print_cv", "print_test", "top1_rows"]

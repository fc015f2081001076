"""The real model's two ONNX sessions (quick to build for small calls, fully optimised for big ones)
give the vectors the single fully optimised session gave before, within 1e-5 per component."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from atomic_agents.memory import MiniLMEmbedder

TEXTS = [
    "deploy went green",
    "The cat sleeps on the sofa.",
    "what runs asynchronous tasks?",
    "x",
    "Quarterly revenue review moved to Friday because the CFO is travelling; " * 12,  # past the 256-token cut
    "Überprüfung der Abrechnung — 請求の確認 — vérification 🚀",
]


def _reference() -> np.ndarray:
    """The settings before the split: one session, every graph optimisation, default threads."""
    emb = MiniLMEmbedder()
    emb._load()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    emb._session = ort.InferenceSession(str(emb.locate()), sess_options=options, providers=["CPUExecutionProvider"])
    return emb.embed_batch(TEXTS)


def test_small_and_big_calls_match_the_former_settings() -> None:
    ref = _reference()
    emb = MiniLMEmbedder()
    small = np.stack([emb.embed(t) for t in TEXTS])  # one text per call: the quick session
    assert emb._bulk_session is None  # small calls never built the optimised one
    assert np.abs(small - ref).max() < 1e-5
    big = emb.embed_batch(TEXTS * 3)  # >= bulk_from texts: the fully optimised session
    assert len(TEXTS) * 3 >= emb.bulk_from and emb._bulk_session is not None
    assert np.abs(big[: len(TEXTS)] - ref).max() < 1e-5
    assert np.allclose(np.linalg.norm(big, axis=1), 1.0, atol=1e-5)
    assert float(small[0] @ small[2]) < 0.9  # and they are real, different embeddings


def test_one_query_gives_the_same_vector_in_every_process() -> None:
    a, b = MiniLMEmbedder(), MiniLMEmbedder()
    b.embed_batch(TEXTS * 3)  # b has built its optimised session too: small calls still use the quick one
    assert np.array_equal(a.embed("billing deploy failed"), b.embed("billing deploy failed"))

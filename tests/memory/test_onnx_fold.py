"""The folded session (the int8 weights decoded once, by numpy) gives the quick session's vectors
bit for bit, serves small calls from a process's sixth one on, and is refused when it would not."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from atomic_agents.memory import MiniLMEmbedder
from atomic_agents.memory import _onnx_fold
from atomic_agents.memory._onnx_fold import FoldError, fold_weights

TEXTS = [
    "deploy went green",
    "When did Maya buy the cargo bike?",
    "x",
    "Quarterly revenue review moved to Friday because the CFO is travelling; " * 12,  # past the 256-token cut
    "Überprüfung der Abrechnung — 請求の確認 — vérification 🚀",
    "",
]


def _quick(emb: MiniLMEmbedder) -> Any:
    emb.embed("load")  # one small call: the quick session only
    assert emb._fast_session is None
    return emb._session


def _folded_session(emb: MiniLMEmbedder) -> tuple[Any, dict[str, np.ndarray]]:
    model, weights = fold_weights(emb.locate().read_bytes())
    options = emb._options(bulk=False)
    options.add_session_config_entry("session.disable_prepacking", "1")
    names = list(weights)
    options.add_external_initializers(names, [ort.OrtValue.ortvalue_from_numpy(weights[n]) for n in names])
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"]), weights


def test_the_folded_graph_computes_the_quick_sessions_numbers_bit_for_bit() -> None:
    emb = MiniLMEmbedder()
    quick = _quick(emb)
    folded, weights = _folded_session(emb)
    for text in TEXTS:  # one text per run, as queries go
        hidden_q = emb._hidden([text], quick)[0]
        hidden_f = emb._hidden([text], folded)[0]
        assert np.array_equal(hidden_q, hidden_f), text
    # and a padded batch of all of them
    assert np.array_equal(emb._hidden(TEXTS, quick)[0], emb._hidden(TEXTS, folded)[0])
    # The decoded weights are the graph's own Cast-then-Mul of the int8 matrices (36 of them) ...
    assert len(weights) == 36 and all(w.dtype == np.float32 and w.ndim == 2 for w in weights.values())
    # ... and the token table stays int8 in the model, gathered by rows before decoding.
    model, _ = fold_weights(emb.locate().read_bytes())
    assert b"inner.embeddings.word_embeddings.weight_q" in model
    assert len(model) < emb.locate().stat().st_size


def test_a_process_moves_to_the_folded_session_at_its_sixth_small_call() -> None:
    emb, ref = MiniLMEmbedder(), MiniLMEmbedder()
    texts = [*TEXTS, "what did the verifier record for goal 7?", "deploy failed again"]
    assert emb.fast_from == 6 and len(texts) > emb.fast_from
    got = []
    for i, text in enumerate(texts):
        got.append(emb.embed(text))
        if i + 1 < emb.fast_from:  # a process of a few calls never builds it
            assert emb._fast_session is None and emb._folded is None
        else:  # built at the sixth, checked on that call and adopted; the quick session let go
            assert emb._fast_session not in (None, False) and emb._session is emb._fast_session
    quick = _quick(ref)
    for vec, text in zip(got, texts):
        assert np.array_equal(vec, ref._embed_with([text], quick)[0])  # the quick session's vectors
    assert len(emb.embed_batch(texts[:3])) == 3  # a small call of several texts runs on it too
    # Big calls keep their own session; the re-ranker's token states come from the folded one.
    ((tokens, vecs),) = emb.token_vectors(["Bob is allergic to peanuts"])
    ((ref_tokens, ref_vecs),) = ref.token_vectors(["Bob is allergic to peanuts"])
    assert tokens == ref_tokens and np.array_equal(vecs, ref_vecs)


def test_warm_builds_both_sessions_before_the_first_query() -> None:
    emb = MiniLMEmbedder()
    emb.warm()
    assert emb._session is not None and emb._fast_session not in (None, False)
    assert np.array_equal(emb.embed(TEXTS[1]), MiniLMEmbedder().embed(TEXTS[1]))


class _Off:
    """A session whose outputs differ from the real one's in the last bits (a kernel that sums differently)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def run(self, *args: Any, **kwargs: Any) -> Any:
        out = self.real.run(*args, **kwargs)
        return [np.nextafter(out[0], np.float32(np.inf))]


def test_a_folded_session_that_differs_in_any_bit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = MiniLMEmbedder()
    real = MiniLMEmbedder._new_folded_session
    monkeypatch.setattr(MiniLMEmbedder, "_new_folded_session", lambda self, bulk: _Off(real(self, bulk)))
    emb.fast_from = 2
    first = emb.embed(TEXTS[0])
    second = emb.embed(TEXTS[1])
    assert emb._fast_session is False  # refused
    third = emb.embed(TEXTS[2])
    ref = MiniLMEmbedder()
    for got, text in zip((first, second, third), TEXTS):
        assert np.array_equal(got, ref.embed(text))  # the quick session's vectors throughout


def test_the_bulk_session_built_from_the_folded_model_gives_the_files_bulk_vectors() -> None:
    emb = MiniLMEmbedder()
    emb.embed("load")
    texts = [f"{t} ({i})" for i in range(3) for t in TEXTS]
    assert len(texts) >= emb.bulk_from
    folded = emb.embed_batch(texts)  # the first big call: the bulk session, from the folded model
    assert emb._folded not in (None, False) and emb._bulk_session is not None
    plain = MiniLMEmbedder()
    plain.embed("load")
    plain._folded = False  # as for a file that does not fold: the bulk session from the file, as before
    assert np.array_equal(folded, plain.embed_batch(texts))


def test_a_model_that_does_not_fold_leaves_the_quick_session_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(data: bytes) -> Any:
        raise FoldError("no int8 weight to fold")

    monkeypatch.setattr(_onnx_fold, "fold_weights", refuse)
    emb = MiniLMEmbedder()
    emb.fast_from = 2
    vecs = [emb.embed(t) for t in TEXTS[:3]]
    assert emb._fast_session is False and emb._folded is False
    ref = MiniLMEmbedder()
    assert all(np.array_equal(v, ref.embed(t)) for v, t in zip(vecs, TEXTS))
    big = emb.embed_batch(TEXTS * 3)  # and big calls get the bulk session from the file
    assert emb._bulk_session is not None
    assert np.abs(big[: len(TEXTS)] - np.stack([ref.embed(t) for t in TEXTS])).max() < 1e-5


@pytest.mark.parametrize(
    "data",
    [b"", b"\x3a\x05abc", b"\x08\xff\xff\xff", b"\x0f\x00", b"\x3a\x02\x08\x01"],
    ids=["empty", "graph-past-its-end", "truncated-varint", "bad-wire-type", "graph-without-weights"],
)
def test_bytes_that_are_not_a_foldable_model_raise_fold_error(data: bytes) -> None:
    with pytest.raises(FoldError):
        fold_weights(data)


def test_a_varint_longer_than_ten_bytes_is_refused_at_once() -> None:
    # a hostile run of continuation bytes: refused at the eleventh, not decoded into a huge integer
    with pytest.raises(FoldError, match="longer than 10 bytes"):
        fold_weights(b"\x3a" + b"\xff" * 100_000)


def test_an_empty_call_counts_for_nothing_and_adopts_nothing() -> None:
    emb = MiniLMEmbedder()
    for t in TEXTS[:5]:
        emb.embed(t)
    out = emb.embed_batch([])  # where the sixth small call would be
    assert out.shape == (0, emb.dimension) and out.dtype == np.float32
    assert emb._small_calls == 5 and emb._fast_session is None  # no candidate checked on no texts
    emb.embed("the sixth real call")
    assert emb._fast_session not in (None, False)


def test_a_bulk_call_keeps_no_token_states_for_a_query() -> None:
    emb = MiniLMEmbedder()
    texts = [f"memory number {i} about the deploy" for i in range(32)] + ["a much longer last text " * 6]
    emb.embed_batch(texts)  # 33 texts: the last sorted batch holds one text, run on the bulk session
    assert emb._last_one is None  # a re-rank must not reuse states of another session than a query's


def test_a_model_file_replaced_after_its_check_is_not_folded(tmp_path: Any) -> None:
    src = MiniLMEmbedder.locate()
    model = tmp_path / "model.onnx"
    model.write_bytes(src.read_bytes())
    emb = MiniLMEmbedder(model_path=model)
    emb.fast_from = 2
    first = emb.embed("checked at load")
    data = bytearray(model.read_bytes())
    data[-1] ^= 0x01  # same size, other bytes, a later mtime
    model.write_bytes(bytes(data))
    second = emb.embed("the call that would fold")  # the quick session, loaded from the checked bytes, serves on
    assert emb._fast_session is False and emb._folded is False
    ref = MiniLMEmbedder()
    assert np.array_equal(first, ref.embed("checked at load")) and np.array_equal(second, ref.embed("the call that would fold"))
    from atomic_agents.exceptions import ModelIntegrityError

    with pytest.raises(ModelIntegrityError):  # and no session is built from the replaced file
        emb.embed_batch(TEXTS * 3)


def test_small_calls_keep_the_quick_session_while_the_fold_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()
    real = _onnx_fold.fold_weights

    def held(data: bytes) -> Any:
        started.set()
        release.wait(30)
        return real(data)

    monkeypatch.setattr(_onnx_fold, "fold_weights", held)
    emb = MiniLMEmbedder()
    emb.fast_from = 2
    emb.embed("first")
    folding = threading.Thread(target=emb.embed, args=("the call that folds",))
    folding.start()
    try:
        assert started.wait(60)
        got: list[np.ndarray] = []
        meanwhile = threading.Thread(target=lambda: got.append(emb.embed("a query while the fold runs")))
        meanwhile.start()
        meanwhile.join(20)
        assert not meanwhile.is_alive() and len(got) == 1  # it did not wait for the fold
    finally:
        release.set()
        folding.join(60)
    assert np.array_equal(got[0], MiniLMEmbedder().embed("a query while the fold runs"))
    assert emb._fast_session not in (None, False)  # and the fold, once done, was adopted


def test_a_query_arriving_while_warm_starts_runs_on_the_quick_session_and_never_folds(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = MiniLMEmbedder()
    folded_by: list[str] = []
    real_fold, real_load = emb._new_folded_session, emb._load
    got: list[np.ndarray] = []

    def fold(*args: Any, **kwargs: Any) -> Any:
        folded_by.append(threading.current_thread().name)
        return real_fold(*args, **kwargs)

    def load(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "warm" and not got:  # a query lands while warm() starts
            query = threading.Thread(target=lambda: got.append(emb.embed("a query meanwhile")), name="query")
            query.start()
            query.join(60)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(emb, "_new_folded_session", fold)
    monkeypatch.setattr(emb, "_load", load)
    warm = threading.Thread(target=emb.warm, name="warm")
    warm.start()
    warm.join(120)
    assert not warm.is_alive() and len(got) == 1
    assert folded_by == ["warm"]  # the fold was built by warm(), once, not on the query's path
    assert emb._fast_session not in (None, False) and emb._session is emb._fast_session
    assert np.array_equal(got[0], MiniLMEmbedder().embed("a query meanwhile"))

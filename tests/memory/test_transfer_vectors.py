"""``export_jsonl(with_vectors=True)`` / ``import_jsonl``: a restore under the same model embeds nothing.

Every backend exports its vectors and imports them (the conformance axis,
``make_store``); the embedder counts what it is asked to embed.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.exceptions import ValidationError
from atomic_agents.memory import HashingEmbedder, MemoryStore, Scope, SQLiteMemoryStore, export_jsonl, import_jsonl

from ._helpers import CountingEmbedder
from .conftest import StoreFactory

TEXTS = ["billing deploy went green", "the cat sleeps on the sofa", "quarterly revenue review moved to friday"]


def _fill(store: MemoryStore, scope: Scope) -> list[str]:
    ids = [store.remember(t, {"n": i}, scope) for i, t in enumerate(TEXTS)]
    store.forget(store.remember("forgotten note", None, scope))
    return ids


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_backend_exports_vectors_with_model_dimension_and_content_hash(
    make_store: StoreFactory, scope: Scope, tmp_path: Path
) -> None:
    store = make_store()
    ids = _fill(store, scope)
    path = tmp_path / "backup.jsonl"
    assert export_jsonl(store, path, with_vectors=True) == 4
    rows = {r["id"]: r for r in _lines(path)}
    stored = store.stored_vectors(ids)
    for mid in ids:
        vec = rows[mid]["vector"]
        assert (vec["model"], vec["dimension"]) == ("hashing-fake-256", 256)
        got = np.frombuffer(base64.b64decode(vec["f32"]), dtype="<f4")
        assert np.array_equal(got, stored[mid])
    assert export_jsonl(store, tmp_path / "plain.jsonl") == 4
    assert all("vector" not in r for r in _lines(tmp_path / "plain.jsonl"))  # the default file is as before

    target_emb = CountingEmbedder()
    target = SQLiteMemoryStore(tmp_path / "restored.db", embedder=target_emb)
    details: dict[str, Any] = {}
    assert import_jsonl(target, path, details=details) == (4, 0)
    assert target_emb.calls == []  # nothing re-embedded
    # the forgotten one keeps its vector in the export; only live memories need one
    assert details == {"with_vectors": 4, "vectors_reused": 3, "reembedded": 0, "other_models": []}
    assert [h.id for h in target.recall("billing deploy", scope, 3)] == [h.id for h in store.recall("billing deploy", scope, 3)]
    target.close()


def test_every_backend_imports_vectors_without_embedding(make_store: StoreFactory, scope: Scope, tmp_path: Path) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    ids = _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    emb = CountingEmbedder()
    target = make_store(emb)
    assert import_jsonl(target, path) == (4, 0)
    assert emb.calls == []
    want, got = source.stored_vectors(ids), target.stored_vectors(ids)
    assert set(got) == set(ids) and all(np.allclose(got[i], want[i], atol=1e-6) for i in ids)
    assert target.recall("sofa cat", scope, 1)[0].id == ids[1]
    source.close()


def test_another_model_re_embeds_and_says_so(make_store: StoreFactory, scope: Scope, tmp_path: Path) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    emb = CountingEmbedder(dimension=128)
    target = make_store(emb)
    details: dict[str, Any] = {}
    assert import_jsonl(target, path, details=details) == (4, 0)
    assert sorted(emb.calls) == sorted(TEXTS)  # the live ones, embedded by the store's own model
    assert details["other_models"] == ["hashing-fake-256"] and details["reembedded"] == 3
    assert details["vectors_reused"] == 0
    assert target.recall("billing deploy", scope, 1)[0].content == TEXTS[0]
    source.close()


def test_a_record_whose_content_changed_since_the_export_is_re_embedded(scope: Scope, tmp_path: Path) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    rows = _lines(path)
    rows[0]["content"] = "edited by hand after the export"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb = CountingEmbedder()
    target = SQLiteMemoryStore(tmp_path / "t.db", embedder=emb)
    assert import_jsonl(target, path) == (4, 0)
    assert emb.calls == ["edited by hand after the export"]
    source.close()
    target.close()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda v: v.update(f32="not base64!"), "not base64"),
        (lambda v: v.update(f32=base64.b64encode(b"\0" * 12).decode()), "holds 3 values"),
        (lambda v: v.update(dimension="256"), "dimension"),
        (lambda v: v.pop("model"), "model"),
        (lambda v: v.update(f32=base64.b64encode(np.full(256, 0.5, dtype="<f4").tobytes()).decode()), "unit vector"),
        (lambda v: v.update(f32=base64.b64encode(np.full(256, np.nan, dtype="<f4").tobytes()).decode()), "unit vector"),
    ],
)
def test_a_malformed_vector_refuses_the_whole_file_naming_the_line(
    make_store: StoreFactory, scope: Scope, tmp_path: Path, change: Any, why: str
) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    rows = _lines(path)
    change(rows[1]["vector"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    emb = CountingEmbedder()
    target = make_store(emb)
    with pytest.raises(ValidationError) as err:
        import_jsonl(target, path)
    assert "line 2" in str(err.value) and why in str(err.value) and err.value.field == "vector"
    assert target.dump() is not None and list(target.dump()) == [] and emb.calls == []  # nothing stored
    source.close()


def test_load_checks_the_vectors_it_is_given(make_store: StoreFactory, scope: Scope) -> None:
    from atomic_agents.memory import Memory

    store = make_store()
    mem = Memory.new("a memory", None, scope, ttl_ms=None, now=1.0)
    with pytest.raises(ValidationError) as err:
        store.load([mem], vectors={mem.id: np.ones(3, dtype=np.float32)})
    assert err.value.field == "vector" and list(store.dump()) == []

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

from atomic_agents.exceptions import StoreError, ValidationError
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


_NAN = base64.b64encode(np.full(256, np.nan, dtype="<f4").tobytes()).decode()


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # vectors that would not be used are checked all the same: a backup is checked whole
        (lambda r: (r["vector"].update(f32=_NAN), r.update(content="changed since")), "unit vector"),
        (lambda r: r["vector"].update(f32=_NAN, model="another-model"), "unit vector"),
        # this store's model with another dimension: no model makes both, the line was edited
        (lambda r: r["vector"].update(dimension=128, f32=base64.b64encode(np.eye(1, 128, dtype="<f4").tobytes()).decode()),
         "128 dimensions, not the 256"),
    ],
)
def test_every_vector_of_the_file_is_checked_used_or_not(scope: Scope, tmp_path: Path, edit: Any, why: str) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    rows = _lines(path)
    edit(rows[2])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    target = SQLiteMemoryStore(tmp_path / "t.db", embedder=HashingEmbedder())
    with pytest.raises(ValidationError) as err:
        import_jsonl(target, path)
    assert "line 3" in str(err.value) and why in str(err.value) and err.value.field == "vector"
    assert list(target.dump()) == []
    source.close()
    target.close()


def test_an_id_on_two_lines_refuses_the_file_naming_both(make_store: StoreFactory, scope: Scope, tmp_path: Path) -> None:
    source = SQLiteMemoryStore(tmp_path / "source.db", embedder=HashingEmbedder())
    _fill(source, scope)
    path = tmp_path / "backup.jsonl"
    export_jsonl(source, path, with_vectors=True)
    rows = _lines(path)
    twin = {**rows[0], "content": "another text under the same id"}
    twin.pop("vector")
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, twin]))
    emb = CountingEmbedder()
    target = make_store(emb)
    with pytest.raises(ValidationError) as err:
        import_jsonl(target, path)
    assert "line 5: the same id as line 1" in str(err.value) and err.value.field == "id"
    assert list(target.dump()) == [] and emb.calls == []
    source.close()


def test_an_edit_between_the_export_reads_never_pairs_old_content_with_the_new_vector(
    make_store: StoreFactory, scope: Scope, tmp_path: Path
) -> None:
    store = make_store()
    ids = _fill(store, scope)
    real = store.stored_vectors

    def edited_meanwhile(ids_: Any, **kwargs: Any) -> Any:  # another process's edit lands between the two reads
        if store.get(ids[0]).content == TEXTS[0]:
            store.edit(ids[0], content="bananas are yellow and ripe")
        return real(ids_, **kwargs)

    store.stored_vectors = edited_meanwhile  # type: ignore[method-assign]
    path = tmp_path / "backup.jsonl"
    details: dict[str, Any] = {}
    export_jsonl(store, path, with_vectors=True, details=details)
    rows = {r["id"]: r for r in _lines(path)}
    assert rows[ids[0]]["content"] == TEXTS[0] and "vector" not in rows[ids[0]]  # the old text goes without one
    assert all("vector" in rows[i] for i in ids[1:]) and details["vectors"] == 3
    emb = CountingEmbedder()
    target = SQLiteMemoryStore(tmp_path / "t.db", embedder=emb)
    import_jsonl(target, path)
    assert emb.calls == [TEXTS[0]]  # re-embedded from its own text
    assert np.allclose(target.stored_vectors([ids[0]])[ids[0]], HashingEmbedder().embed(TEXTS[0]), atol=1e-6)
    target.close()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-vectors.npy", "-ann.usearch"])
def test_an_export_onto_the_stores_own_files_is_refused(scope: Scope, tmp_path: Path, suffix: str) -> None:
    db = tmp_path / "memory.db"
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    ids = _fill(store, scope)
    before = db.read_bytes()
    for spelling in (db.with_name(db.name + suffix), tmp_path / "sub" / ".." / (db.name + suffix)):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(ValidationError) as err:
            export_jsonl(store, spelling)
        assert "this store's own files" in str(err.value) and err.value.field == "output"
    assert db.read_bytes() == before and store.get(ids[0]).content == TEXTS[0]
    assert export_jsonl(store, tmp_path / "memory.db-backup.jsonl") == 4  # a name that only starts like it is fine
    store.close()


def test_the_exports_temporary_file_is_never_written_through_a_symlink(
    scope: Scope, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    store = SQLiteMemoryStore(tmp_path / "memory.db", embedder=HashingEmbedder())
    _fill(store, scope)
    out, outside = tmp_path / "out", tmp_path / "outside.txt"
    out.mkdir()
    outside.write_text("keep me\n")
    monkeypatch.setattr(time, "monotonic_ns", lambda: 42)  # the temporary name is known in advance
    (out / f".backup.jsonl.{os.getpid()}.42.tmp").symlink_to(outside)
    with pytest.raises(StoreError) as err:
        export_jsonl(store, out / "backup.jsonl")
    assert "backup.jsonl" in str(err.value)
    assert outside.read_text() == "keep me\n" and not (out / "backup.jsonl").exists()
    store.close()

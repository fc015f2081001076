"""``memory remember --jsonl`` / ``memory recall --jsonl``, ``--durability``, ``export --with-vectors`` on the CLI.

In-process runs of the real command line on a real SQLite file with the fake
embedder; ``HashingEmbedder.embed_batch`` is wrapped to count what gets embedded.
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.cli import main
from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore

SCOPE = ["--agent-id", "builder", "--user-id", "alice", "--org-id", "acme", "--workspace-id", "acme/web"]
SECRET = "AKIAIOSFODNN7EXAMPLE"


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str,
        stdin: bytes | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    with pytest.raises(SystemExit) as exit_info:
        main(["memory", *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def lines(out: str) -> list[Any]:
    return [json.loads(line) for line in out.splitlines()]


def jsonl(*rows: Any) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each ``embed_batch`` call's texts (the real fake embedder underneath)."""
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "memory.db"))
    monkeypatch.delenv("ATOMIC_AGENTS_DURABILITY", raising=False)
    seen: list[list[str]] = []
    real = HashingEmbedder.embed_batch

    def counting(self: HashingEmbedder, texts: Sequence[str]) -> np.ndarray:
        seen.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed_batch", counting)
    return seen


def stored(tmp_path: Path) -> list[tuple[str, str]]:
    if not (tmp_path / "memory.db").exists():
        return []
    with sqlite3.connect(tmp_path / "memory.db") as c:
        return c.execute("SELECT user_id, content FROM memories ORDER BY seq").fetchall()


# ------------------------------------------------------------------ remember --jsonl
def test_remember_jsonl_stores_every_line_in_order_with_one_embedding_batch(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]], tmp_path: Path
) -> None:
    data = jsonl({"content": "billing deploy went green", "metadata": {"goal_id": "g1"}}, "",
                 {"content": "cat on the sofa", "user_id": "bob"}, {"fact": "legacy spelling", "ttl_ms": 60000})
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=data)
    assert code == 0
    answers = lines(out)
    assert [a["status"] for a in answers] == ["remembered"] * 3 and len({a["id"] for a in answers}) == 3
    assert calls == [["billing deploy went green", "cat on the sofa", "legacy spelling"]]  # one batch
    assert stored(tmp_path) == [("alice", "billing deploy went green"), ("bob", "cat on the sofa"), ("alice", "legacy spelling")]
    store = SQLiteMemoryStore(tmp_path / "memory.db", embedder=HashingEmbedder())
    first, third = store.get(answers[0]["id"]), store.get(answers[2]["id"])
    assert first.metadata["goal_id"] == "g1" and first.workspace_id == "acme/web" and first.expires_at is None
    assert third.expires_at is not None  # the line's ttl_ms
    store.close()


def test_remember_jsonl_reads_a_file_too(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                         calls: list[list[str]], tmp_path: Path) -> None:
    src = tmp_path / "batch.jsonl"
    src.write_bytes(jsonl({"content": "one"}, {"content": "two"}))
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", str(src), *SCOPE)
    assert code == 0 and len(lines(out)) == 2 and [c for _, c in stored(tmp_path)] == ["one", "two"]
    code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", str(tmp_path / "missing.jsonl"), *SCOPE)
    assert code == 1 and lines(out)[0]["error"] == "NotFoundError" and "missing.jsonl" in err


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ('{"content": "x", "metadata": [1]}', "metadata", "line 3"),
        ('{"content": ""}', "content", "line 3"),
        ('{"metadata": {}}', "content", "line 3"),
        ('{"content": "x", "ttl_ms": -5}', "ttl_ms", "line 3"),
        ('{"content": "x", "ttl_ms": "soon"}', "ttl_ms", "line 3"),
        ('{"content": "x", "agent_id": ""}', "agent_id", "line 3"),
        ('{"content": "x", "contnt": "typo"}', "contnt", "line 3"),
        ('["not", "an", "object"]', None, "line 3"),
        ("{not json", None, "line 3"),
    ],
)
def test_remember_jsonl_one_bad_line_stores_nothing_and_names_line_and_field(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]], tmp_path: Path,
    bad: str, field: str | None, words: str
) -> None:
    data = jsonl({"content": "fine one"}, {"content": "fine two"}, bad, {"content": "after"})
    code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=data)
    assert code == 1 and "Traceback" not in err
    error = lines(out)[0]
    assert words in error["message"] and error.get("field") == field and error["path"] == "<stdin>"
    assert stored(tmp_path) == [] and calls == []  # checked before the store opened: nothing embedded or kept


def test_remember_jsonl_missing_scope_names_the_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                     calls: list[list[str]], tmp_path: Path) -> None:
    data = jsonl({"content": "has one", "user_id": "bob"}, {"content": "has none"})
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", "-", "--agent-id", "a", stdin=data)
    error = lines(out)[0]
    assert code == 1 and error["field"] == "user_id" and error["message"].startswith("line 2:")
    assert stored(tmp_path) == []


def test_remember_jsonl_refuses_a_secret_without_echoing_it(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                           calls: list[list[str]], tmp_path: Path) -> None:
    for row in ({"content": f"the key is {SECRET} ok"}, {"content": "x", "metadata": {"k": SECRET}}, {SECRET: "x", "content": "y"}):
        code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=jsonl({"content": "fine"}, row))
        assert code == 1 and SECRET not in out + err
        assert "2" in lines(out)[0]["path"] + lines(out)[0]["message"]
    assert stored(tmp_path) == [] and calls == []


def test_remember_jsonl_bad_utf8_names_the_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                calls: list[list[str]], tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b'{"content": "ok"}\n{"content": "\xff\xfe"}\n')
    code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", str(src), *SCOPE)
    assert code == 1 and lines(out)[0]["error"] == "EncodingError" and "bad.jsonl:2:" in err
    assert stored(tmp_path) == []


def test_remember_jsonl_and_content_together_is_refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                        calls: list[list[str]], tmp_path: Path) -> None:
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, "also this", stdin=jsonl({"content": "x"}))
    assert code == 1 and lines(out)[0]["field"] == "jsonl" and stored(tmp_path) == []
    code, _, err = run(capsys, monkeypatch, "remember", "--agent-id", "a", "no user")  # without --jsonl the scope is required
    assert code == 2 and "--user-id" in err


class _CountingBytes(io.BytesIO):
    """A stdin that counts how many bytes the command took from it."""

    taken = 0

    def read(self, size: int | None = -1) -> bytes:
        got = super().read(size)
        self.taken += len(got)
        return got

    def read1(self, size: int = -1) -> bytes:
        got = super().read1(size)
        self.taken += len(got)
        return got

    def readline(self, size: int | None = -1) -> bytes:
        got = super().readline(size)
        self.taken += len(got)
        return got

    def readinto(self, b: Any) -> int:
        n = super().readinto(b)
        self.taken += n
        return n


@pytest.mark.parametrize(
    ("command", "bad", "good"),
    [
        ("remember", {"content": 5}, {"content": "a fine memory that would be stored"}),
        ("recall", {"query": "q", "limit": 0}, {"query": "a fine question to answer"}),
    ],
)
def test_a_bad_first_line_is_refused_before_the_rest_of_the_input_is_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]], tmp_path: Path,
    command: str, bad: Any, good: Any,
) -> None:
    tail = jsonl(good) * 200_000  # ~8 MB after the bad line (an endless `yes` pipe, as far as the reader can tell)
    raw = _CountingBytes(jsonl(bad) + tail)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw, encoding="utf-8"))  # type: ignore[arg-type]
    with pytest.raises(SystemExit) as exit_info:
        main(["memory", command, "--jsonl", "-", *SCOPE])
    out, _ = capsys.readouterr()
    assert exit_info.value.code == 1 and lines(out)[0]["message"].startswith("line 1:")
    assert raw.taken < 1_000_000 < len(tail)  # refused at line 1, the rest left unread
    assert stored(tmp_path) == [] and calls == []


@pytest.mark.parametrize(
    "row",
    [{"content": "x", "fact": "y"}, {"content": "x", "fact": 5}],
)
def test_remember_jsonl_refuses_a_line_giving_both_spellings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]], tmp_path: Path, row: Any
) -> None:
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=jsonl({"content": "fine"}, row))
    error = lines(out)[0]
    assert code == 1 and error["message"] == "line 2: give content or fact, not both" and error["field"] == "content"
    assert stored(tmp_path) == []


@pytest.mark.parametrize("row", [{"query": "q", "topic": "t"}, {"query": "q", "limit": 3, "top_k": 0}])
def test_recall_jsonl_refuses_a_line_giving_both_spellings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]], tmp_path: Path, row: Any
) -> None:
    code, out, _ = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, stdin=jsonl(row))
    error = lines(out)[0]
    assert code == 1 and error["message"].startswith("line 1: give ") and error["message"].endswith(", not both")


# ------------------------------------------------------------------ recall --jsonl
def test_recall_jsonl_answers_in_input_order_each_as_the_single_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]]
) -> None:
    data = jsonl({"content": "billing deploy went green", "metadata": {"goal_id": "g1"}},
                 {"content": "billing deploy failed", "metadata": {"goal_id": "g2"}},
                 {"content": "cat on the sofa", "user_id": "bob"})
    assert run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=data)[0] == 0
    queries = [{"query": "billing deploy"}, {"query": "sofa", "user_id": "bob", "limit": 1},
               {"query": "billing deploy", "filters": {"goal_id": "g2"}}, {"query": "billing", "limit": 1}]
    code, out, _ = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, "--limit", "3", stdin=jsonl(*queries))
    assert code == 0
    answers = lines(out)
    singles = [
        ["recall", *SCOPE, "billing deploy", "--limit", "3"],
        ["recall", "--agent-id", "builder", "--user-id", "bob", "--org-id", "acme", "--workspace-id", "acme/web", "sofa", "--limit", "1"],
        ["recall", *SCOPE, "billing deploy", "--filter", "goal_id=g2", "--limit", "3"],
        ["recall", *SCOPE, "billing", "--limit", "1"],
    ]
    for answer, args in zip(answers, singles, strict=True):
        single_code, single_out, _ = run(capsys, monkeypatch, *args)
        assert single_code == 0 and answer == json.loads(single_out)
    assert [len(a["results"]) for a in answers] == [2, 1, 1, 1]
    assert answers[2]["results"][0]["content"] == "billing deploy failed"


def test_recall_jsonl_bad_line_answers_nothing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               calls: list[list[str]]) -> None:
    for bad, field in (({"query": "x", "limit": 0}, "limit"), ({"query": ""}, "query"), ({"limit": 2}, "query"),
                       ({"query": "x", "filters": "goal=g1"}, "filters"), ({"query": "x", "k": 1}, "k")):
        code, out, _ = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, stdin=jsonl({"query": "fine"}, bad))
        answers = lines(out)
        assert code == 1 and len(answers) == 1 and answers[0]["field"] == field and answers[0]["message"].startswith("line 2:")
    assert calls == []  # no query was embedded


# ------------------------------------------------------------------ --durability
@pytest.mark.parametrize(("flag", "durable"), [([], True), (["--durability", "full"], True), (["--durability", "normal"], False),
                                               (["--durability", "NORMAL"], False)])
def test_durability_reaches_the_store(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                      calls: list[list[str]], tmp_path: Path, flag: list[str], durable: bool) -> None:
    from atomic_agents.memory import _sqlite

    seen: list[int] = []
    real = _sqlite.connect

    def spy(path: Path, *, durable: bool = True) -> sqlite3.Connection:
        conn = real(path, durable=durable)
        seen.append(conn.execute("PRAGMA synchronous").fetchone()[0])
        return conn

    monkeypatch.setattr(_sqlite, "connect", spy)
    code, _, _ = run(capsys, monkeypatch, "remember", *SCOPE, *flag, "a memory")
    assert code == 0 and seen == [2 if durable else 1]  # FULL = 2, NORMAL = 1
    assert [c for _, c in stored(tmp_path)] == ["a memory"]


def test_durability_is_validated(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                 calls: list[list[str]], tmp_path: Path) -> None:
    code, _, err = run(capsys, monkeypatch, "remember", *SCOPE, "--durability", "sometimes", "x")
    assert code == 2 and "--durability" in err
    monkeypatch.setenv("ATOMIC_AGENTS_DURABILITY", "sometimes")
    code, out, _ = run(capsys, monkeypatch, "remember", *SCOPE, "x")
    assert code == 1 and lines(out)[0]["field"] == "durability"
    monkeypatch.setenv("ATOMIC_AGENTS_DURABILITY", "normal")
    assert run(capsys, monkeypatch, "forget-expired", "--durability", "full")[0] == 0
    assert stored(tmp_path) == []


def test_open_store_durable(tmp_path: Path) -> None:
    from atomic_agents.memory import open_store

    for durable, level in ((True, 2), (False, 1)):
        store = open_store(tmp_path / f"{durable}.db", embedder=HashingEmbedder(), durable=durable)
        assert isinstance(store, SQLiteMemoryStore) and store.durable is durable
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == level
        store.close()
    assert open_store(tmp_path / "d.db", embedder=HashingEmbedder()).durable is True  # type: ignore[attr-defined]


def test_closing_keeps_committed_data_and_skips_the_checkpoint(tmp_path: Path) -> None:
    from atomic_agents.memory import Scope

    path = tmp_path / "m.db"
    store = SQLiteMemoryStore(path, embedder=HashingEmbedder())
    mid = store.remember("kept across processes", None, Scope("a", "u"))
    store.close()
    wal = path.with_name("m.db-wal")
    # no checkpoint at close, the WAL stays (3.12+: setconfig; 3.11: ctypes; tests/memory/test_sqlite_wal.py)
    assert wal.exists() and wal.stat().st_size > 0
    again = SQLiteMemoryStore(path, embedder=HashingEmbedder())
    assert again.get(mid).content == "kept across processes"
    again.close()


# ------------------------------------------------------------------ export --with-vectors
def test_export_with_vectors_then_import_embeds_nothing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                       calls: list[list[str]], tmp_path: Path) -> None:
    assert run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=jsonl({"content": "one"}, {"content": "two"}))[0] == 0
    backup = tmp_path / "backup.jsonl"
    code, out, _ = run(capsys, monkeypatch, "export", "--with-vectors", "-o", str(backup))
    assert code == 0 and json.loads(out)["exported"] == 2
    assert all(r["vector"]["model"] == "hashing-fake-256" for r in lines(backup.read_text()))
    calls.clear()
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "restored.db"))
    code, out, _ = run(capsys, monkeypatch, "import", str(backup))
    assert code == 0 and json.loads(out) == {"status": "ok", "imported": 2, "skipped": 0, "vectors_reused": 2, "reembedded": 0}
    assert calls == []
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "other-model.db"))
    code, out, err = run(capsys, monkeypatch, "import", str(backup), "--embedder", "hashing-fake-128")
    assert code == 0 and json.loads(out)["reembedded"] == 2 and "re-embedded 2" in err and "hashing-fake-256" in err
    assert sorted(t for c in calls for t in c) == ["one", "two"]


def test_postgres_durable_false_turns_synchronous_commit_off_for_its_sessions(pg_dsn: str) -> None:
    from atomic_agents.memory import open_store

    # The test server runs with synchronous_commit off; this session asks for on, so the
    # non-durable store's override is observable.
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

    url = urlsplit(pg_dsn)  # keep the test schema's search_path, add the setting
    query = dict(parse_qsl(url.query))
    query["options"] = f"{query.get('options', '')} -c synchronous_commit=on".strip()
    dsn = urlunsplit(url._replace(query=urlencode(query, quote_via=quote)))
    for durable, want in ((True, "on"), (False, "off")):
        store = open_store(dsn, embedder=HashingEmbedder(), durable=durable)
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == want
            assert conn.execute("SELECT current_schema()").fetchone()[0].startswith("aa_test_")  # not public
        store.close()


def test_recall_jsonl_takes_filter_defaults_from_the_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                            calls: list[list[str]]) -> None:
    data = jsonl({"content": "billing deploy went green", "metadata": {"goal_id": "g1"}},
                 {"content": "billing deploy failed", "metadata": {"goal_id": "g2"}})
    assert run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=data)[0] == 0
    queries = jsonl({"query": "billing deploy"}, {"query": "billing deploy", "filters": {"goal_id": "g1"}})
    code, out, _ = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, "--filter", "goal_id=g2", stdin=queries)
    assert code == 0
    assert [[r["metadata"]["goal_id"] for r in a["results"]] for a in lines(out)] == [["g2"], ["g1"]]


# -- hostile input found by review: each a typed error naming the place, nothing written ------


@pytest.mark.parametrize("where", ["content", "metadata value", "metadata key", "scope"])
def test_a_lone_surrogate_is_a_typed_error_naming_line_and_field(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """``"\\ud800"`` is valid JSON but not text: it was a UnicodeEncodeError traceback from the hash or SQLite."""
    row = {"content": "fine", "metadata": {"k": "v"}}
    field = {"content": "content", "metadata value": "metadata", "metadata key": "metadata", "scope": "user_id"}[where]
    if where == "content":
        row["content"] = "a\ud800b"
    elif where == "metadata value":
        row["metadata"] = {"k": "\ud800"}
    elif where == "metadata key":
        row["metadata"] = {"\udfff": 1}
    else:
        row["user_id"] = "al\ud800ce"
    code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=jsonl({"content": "first"}, row))
    assert code == 1 and "Traceback" not in err
    got = json.loads(out)
    assert got["error"] == "ValidationError" and got["field"] == field and got["rule"] == "encoding"
    assert got["message"].startswith("line 2: ")
    assert not (tmp_path / "memory.db").exists() or SQLiteMemoryStore(tmp_path / "memory.db", embedder=HashingEmbedder()).health().total == 0


def test_a_lone_surrogate_in_a_query_or_a_filter_is_a_typed_error(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, stdin=b'{"query": "q\\ud800"}\n')
    assert code == 1 and "Traceback" not in err and json.loads(out)["field"] == "query" and json.loads(out)["rule"] == "encoding"
    code, out, err = run(capsys, monkeypatch, "list", *SCOPE, "--filter", '{"k": "\\ud800"}')
    assert code == 1 and "Traceback" not in err and json.loads(out)["field"] == "filters" and json.loads(out)["rule"] == "encoding"


def test_filter_errors_name_the_filters_not_the_metadata(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, monkeypatch, "list", *SCOPE, "--filter", "a=NaN")
    assert code == 1 and json.loads(out)["field"] == "filters" and "metadata" not in json.loads(out)["message"]
    code, out, _ = run(capsys, monkeypatch, "recall", "--jsonl", "-", *SCOPE, stdin=b'{"query": "x", "filters": {"a": NaN}}\n')
    assert code == 1 and json.loads(out)["field"] == "filters"


def test_a_line_longer_than_the_reader_reads_is_refused_naming_it(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A file without newlines (``/dev/zero``) was read whole: a MemoryError traceback, or the machine's memory."""
    import atomic_agents._text as text

    monkeypatch.setattr(text, "MAX_LINE_BYTES", 1000)
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl({"content": "first"}) + b"x" * 5000)  # (no newline at all on line 2)
    code, out, err = run(capsys, monkeypatch, "remember", "--jsonl", str(src), *SCOPE)
    assert code == 1 and "Traceback" not in err
    got = json.loads(out)
    assert got["rule"] == "max-size" and got["message"] == "line 2: longer than 1000 bytes" and got["path"] == str(src)
    assert not calls  # nothing embedded, nothing stored
    src.write_bytes(b"x" * 5000)
    code, out, _ = run(capsys, monkeypatch, "import", str(src))
    assert code == 1 and json.loads(out)["rule"] == "max-size" and json.loads(out)["message"].startswith("line 1: ")


def test_decode_lines_reads_on_after_an_over_long_line() -> None:
    from atomic_agents._text import decode_lines

    got = list(decode_lines(io.BytesIO(b"a\n" + b"y" * 50 + b"\nb\n"), path="f", max_line=10))
    assert [n for n, _ in got] == [1, 2, 3] and got[0][1] == "a\n" and got[2][1] == "b\n"
    assert getattr(got[1][1], "rule", None) == "max-size" and str(got[1][1]).startswith("f:2:")


@pytest.mark.parametrize("name", ["hashing-fake-abc", "hashing-fake-0", "hashing-fake-99999999", "hashing-fake-٣"])
def test_a_bad_fake_width_is_refused_before_the_store_is_touched(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    """``hashing-fake-0`` divided by zero after stamping the new store's model; ``-abc`` was a ValueError traceback."""
    code, out, err = run(capsys, monkeypatch, "remember", *SCOPE, "--embedder", name, "x")
    assert code == 1 and "Traceback" not in err and json.loads(out)["field"] == "embedder"
    assert not (tmp_path / "memory.db").exists()


def test_an_unknown_embedder_name_is_not_echoed(calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(capsys, monkeypatch, "recall", *SCOPE, "--embedder", SECRET, "q")
    assert code == 1 and SECRET not in out + err


def test_import_prints_the_files_model_ids_neither_as_markup_nor_at_all(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A model id ``[/oops]`` was read as rich markup: a MarkupError traceback after the rows were committed."""
    assert run(capsys, monkeypatch, "remember", *SCOPE, "hi")[0] == 0
    backup = tmp_path / "b.jsonl"
    assert run(capsys, monkeypatch, "export", "--with-vectors", "-o", str(backup))[0] == 0
    for model in ("[/oops]", "ghp_" + "a1B2" * 9):  # markup; a GitHub token's shape
        rows = [json.loads(line) for line in backup.read_text().splitlines()]
        rows[0]["vector"]["model"] = model
        bad = tmp_path / "bad.jsonl"
        bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
        monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / f"other-{len(model)}.db"))
        code, out, err = run(capsys, monkeypatch, "import", str(bad))
        assert code == 0 and json.loads(out)["imported"] == 1 and json.loads(out)["reembedded"] == 1, (out, err)
        assert "re-embedded 1 memories" in err and "from 1 other model, not" in err and model not in err + out


def test_export_names_the_path_it_was_given_when_it_cannot_write_there(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert run(capsys, monkeypatch, "remember", *SCOPE, "hi")[0] == 0
    for target, says in ((tmp_path, "is a folder"), (tmp_path / "no" / "x.jsonl", "does not exist")):
        code, out, err = run(capsys, monkeypatch, "export", "-o", str(target))
        got = json.loads(out)
        assert code == 1 and got["field"] == "output" and says in got["message"] and str(target) in got["message"]
        assert ".tmp" not in out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db", "memory.db-shm", "memory.db-wal"] or not any(
        p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_export_with_vectors_refuses_a_store_of_another_model_and_counts_what_it_wrote(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The backup carried no vector at all, silently, when the embedder named was not the store's."""
    assert run(capsys, monkeypatch, "remember", *SCOPE, "one")[0] == 0
    assert run(capsys, monkeypatch, "remember", *SCOPE, "two")[0] == 0
    code, out, _ = run(capsys, monkeypatch, "export", "--with-vectors", "-o", str(tmp_path / "b.jsonl"))
    assert code == 0 and json.loads(out)["vectors"] == 2 and json.loads(out)["exported"] == 2
    code, out, err = run(capsys, monkeypatch, "export", "--with-vectors", "--embedder", "hashing-fake-64", "-o", str(tmp_path / "c.jsonl"))
    assert code == 1 and json.loads(out)["error"] == "EmbedderMismatchError" and not (tmp_path / "c.jsonl").exists()


def test_health_names_the_database_file_itself(
    calls: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As a daemon for it names it (it serves the resolved file), so both answers are the same bytes."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATOMIC_AGENTS_DB", "link/m.db")
    assert run(capsys, monkeypatch, "remember", *SCOPE, "hi")[0] == 0
    code, out, _ = run(capsys, monkeypatch, "health")
    assert code == 0 and json.loads(out)["path"] == str((tmp_path / "real" / "m.db").resolve())


# ------------------------------------------------------------------ import: what it reads
def test_import_of_a_missing_file_creates_no_database(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                      calls: list[list[str]], tmp_path: Path) -> None:
    code, out, err = run(capsys, monkeypatch, "import", str(tmp_path / "nowhere.jsonl"))
    assert code == 1 and lines(out)[0]["error"] == "NotFoundError" and "nowhere.jsonl" in err
    assert not (tmp_path / "memory.db").exists()


def test_import_from_stdin_reads_utf8_bytes_whatever_the_locale(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                                calls: list[list[str]], tmp_path: Path) -> None:
    code, out, _ = run(capsys, monkeypatch, "remember", "--jsonl", "-", *SCOPE, stdin=jsonl({"content": "café au lait"}))
    assert code == 0
    code, backup, _ = run(capsys, monkeypatch, "export")
    assert code == 0 and "café" in backup
    (tmp_path / "memory.db").unlink()
    # a latin-1 locale: the text layer would decode é's two UTF-8 bytes as two characters
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(backup.encode()), encoding="latin-1"))
    with pytest.raises(SystemExit) as exit_info:
        main(["memory", "import", "-"])
    assert exit_info.value.code in (0, None)
    assert [c for _, c in stored(tmp_path)] == ["café au lait"]
    capsys.readouterr()
    bad = backup.encode().replace("café".encode(), b"caf\xe9")  # not UTF-8: refused by line, named as stdin
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad), encoding="latin-1"))
    with pytest.raises(SystemExit) as exit_info:
        main(["memory", "import", "-"])
    error = lines(capsys.readouterr().out)[0]
    assert exit_info.value.code == 1 and error["error"] == "EncodingError" and error["path"] == "<stdin>" and error["line"] == 1


def test_a_filter_too_deep_to_compare_is_named_by_its_position_not_its_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, calls: list[list[str]]
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    code, out, err = run(capsys, monkeypatch, "recall", "q", *SCOPE, "--filter", "ok=1", "--filter", f"{SECRET}={deep}")
    error = lines(out)[0]
    assert code == 1 and SECRET not in out + err and error["message"].startswith("--filter #2:") and error["field"] == "filter"

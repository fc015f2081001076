"""`atomic-agents daemon`: memory commands through a warm daemon answer byte for byte as in-process.

Every command here is a real process (``python -m atomic_agents.cli``) with pipes on
stdin/stdout/stderr, as an agent's script runs it; the daemon is a real process on a
real Unix socket. Each test has its own runtime folder (``XDG_RUNTIME_DIR``) and
stops its daemon at teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atomic_agents import _daemon_client as client
from atomic_agents.cli import _daemon

SRC = Path(__file__).resolve().parents[2] / "src"
SCOPE = ["--agent-id", "builder", "--user-id", "alice", "--org-id", "acme", "--workspace-id", "acme/web"]


class Env:
    def __init__(self, tmp: Path, runtime: str) -> None:
        self.tmp, self.runtime = tmp, runtime
        self.db = tmp / "memory.db"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
        self.env.update(XDG_RUNTIME_DIR=runtime, ATOMIC_AGENTS_EMBEDDER="hashing",
                        PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.pids: list[int] = []

    def cli(self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
        p = subprocess.run([sys.executable, "-m", "atomic_agents.cli", *args], input=stdin, capture_output=True,
                           env={**self.env, **(env or {})}, cwd=self.tmp, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def mem(self, *args: str, stdin: bytes = b"", daemon: bool = True) -> tuple[int, bytes, bytes]:
        return self.cli("memory", "--db", str(self.db), *args, stdin=stdin,
                        env=None if daemon else {"ATOMIC_AGENTS_DAEMON": "off"})

    def start(self, *extra: str) -> dict[str, Any]:
        code, out, err = self.cli("daemon", "start", "--db", str(self.db), "--json", *extra)
        assert code == 0, err
        data = json.loads(out)
        self.pids.append(data["pid"])
        return data

    def status(self) -> tuple[int, dict[str, Any]]:
        code, out, _ = self.cli("daemon", "status", "--db", str(self.db), "--json")
        return code, json.loads(out)

    def requests(self) -> int:
        code, data = self.status()
        assert code == 0, data
        return int(data["requests"])

    @property
    def sock(self) -> str:
        return client.socket_path(os.path.realpath(self.db))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    runtime = tempfile.mkdtemp(prefix="aa-", dir="/tmp")  # short: a Unix socket path has ~100 bytes
    os.chmod(runtime, 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)  # where this process looks (Env.sock, client.*)
    e = Env(tmp_path, runtime)
    try:
        yield e
    finally:
        e.cli("daemon", "stop", "--db", str(e.db))
        for pid in e.pids:
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):  # pragma: no cover - a leak is a failure, and is cleaned up
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"daemon {pid} still running at teardown")
        shutil.rmtree(runtime, ignore_errors=True)


def _seed(e: Env) -> list[str]:
    ids = []
    for text, meta in [("billing deploy went green after the migration", '{"goal_id": "g1", "stage": "action"}'),
                       ("the cat sleeps on the sofa", '{"goal_id": "g2"}'),
                       ("rollback: revert the release tag of the checkout API", '{"goal_id": "g1"}')]:
        code, out, err = e.mem("remember", *SCOPE, text, "--metadata", meta, daemon=False)
        assert code == 0, err
        ids.append(json.loads(out)["id"])
    return ids


def _battery(ids: list[str]) -> list[tuple[list[str], bytes]]:
    """Command lines (and stdin) covering answers and every kind of error of the routed commands."""
    return [
        (["recall", *SCOPE, "billing deploy"], b""),
        (["recall", *SCOPE, "--query", "-", "--limit", "2"], "sofa cat ünïcode\r\n".encode()),
        (["search", *SCOPE, "--keywords", "deploy sofa", "--limit", "5"], b""),
        (["search-semantic", *SCOPE, "release", "--filter", "goal_id=g1"], b""),
        (["search-hybrid", *SCOPE, "checkout", "--filters", '{"goal_id": "g1"}'], b""),
        (["list", *SCOPE, "--filter", "goal_id=g1"], b""),
        (["list", *SCOPE, "--json", "--limit", "1"], b""),
        (["get", ids[0]], b""),
        (["get", "00000000-0000-4000-8000-000000000000"], b""),  # NotFoundError: one line, exit 1
        (["get", "no-such-id"], b""),  # not a UUID: ValidationError
        (["remember", *SCOPE, "x", "--metadata", "[1, 2]"], b""),  # typed ValidationError, nothing written
        (["remember", *SCOPE, "x", "--metadata", "{bad json"], b""),
        (["recall", *SCOPE, "q", "--limit", "0"], b""),
        (["search", *SCOPE, "q", "--filter", "nope"], b""),  # no such option: usage error, exit 2
        (["list", *SCOPE, "--filter", "novalue"], b""),
        (["recall", "--user-id", "alice", "q"], b""),  # missing --agent-id: usage error
        (["recall", *SCOPE, "q", "--embedder", "nope"], b""),  # unknown embedder
        (["remember", *SCOPE, "--content", "aws key AKIAIOSFODNN7EXAMPLE secret"], b""),  # refused secret
        (["prune", *SCOPE[:4]], b""),  # dry run
        (["forget", "no-such-id"], b""),
    ]


def test_answers_identical_with_and_without_the_daemon(env: Env) -> None:
    ids = _seed(env)
    battery = _battery(ids)
    before = [env.mem(*args, stdin=stdin, daemon=False) for args, stdin in battery]
    env.start()
    served0 = env.requests()
    during = [env.mem(*args, stdin=stdin) for args, stdin in battery]
    assert env.requests() - served0 == len(battery)  # every one went through the daemon
    for (args, _), b, d in zip(battery, before, during):
        assert d == b, args
    codes = {code for code, _, _ in before}
    assert codes == {0, 1, 2}  # answers, typed errors and usage errors were all compared
    assert b'"error": "NotFoundError"' in before[8][1] and before[8][2].startswith(b"error: ")


def test_remember_and_edit_through_the_daemon_are_seen_in_process(env: Env) -> None:
    _seed(env)
    env.start()
    code, out, err = env.mem("remember", *SCOPE, "--content", "-", "--metadata", '{"goal_id": "g9"}',
                             stdin="zebra crossing near the station\n".encode())
    assert code == 0 and err == b""
    mid = json.loads(out)["id"]
    assert json.loads(out) == {"id": mid, "status": "remembered"}
    code, out, _ = env.mem("edit", mid, "--metadata", '{"goal_id": "g10"}')
    assert code == 0
    code, got, _ = env.mem("get", mid, daemon=False)
    assert code == 0 and json.loads(got)["content"] == "zebra crossing near the station\n"
    assert json.loads(got)["metadata"]["goal_id"] == "g10"


def test_writes_of_another_process_are_in_the_daemons_next_answer(env: Env) -> None:
    _seed(env)
    env.start()
    for cmd in ("recall", "search", "search-hybrid"):  # warm every path of the daemon's store
        assert env.mem(cmd, *SCOPE, "zebra")[0] == 0
    code, out, _ = env.mem("remember", *SCOPE, "zebra crossing near the station", daemon=False)
    mid = json.loads(out)["id"]
    served = env.requests()
    for cmd in ("recall", "search", "search-hybrid", "list"):
        code, out, _ = env.mem(cmd, *SCOPE, *([] if cmd == "list" else ["zebra crossing"]))
        data = json.loads(out)
        assert mid in [r["id"] for r in data.get("results", data.get("memories", []))], cmd
        assert (code, out) == env.mem(cmd, *SCOPE, *([] if cmd == "list" else ["zebra crossing"]), daemon=False)[:2]
    code, out, _ = env.mem("forget", mid, daemon=False)
    assert code == 0
    code, out, _ = env.mem("recall", *SCOPE, "zebra crossing")
    assert mid not in out.decode()
    assert env.requests() - served == 5


def test_start_status_stop_and_one_daemon_per_database(env: Env) -> None:
    code, data = env.status()
    assert code == 1 and data["running"] is False and data["db"] == os.path.realpath(env.db)
    first = env.start("--idle-timeout", "600")
    assert first["running"] and first["db"] == os.path.realpath(env.db) and first["socket"] == env.sock
    assert stat.S_IMODE(os.lstat(env.sock).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(os.path.dirname(env.sock)).st_mode) == 0o700
    again = env.start()
    assert again["pid"] == first["pid"]  # the running one is reported, no second daemon
    env.mem("list", *SCOPE)
    code, data = env.status()
    assert code == 0 and data["pid"] == first["pid"] and data["requests"] >= 1 and data["uptime_s"] >= 0
    assert data["idle_timeout_s"] == 600
    code, out, _ = env.cli("daemon", "stop", "--db", str(env.db), "--json")
    assert code == 0 and json.loads(out)["stopped"] is True
    assert not _alive(first["pid"]) and not os.path.exists(env.sock)
    code, data = env.status()
    assert code == 1 and not data["running"]
    code, out, _ = env.cli("daemon", "stop", "--db", str(env.db), "--json")
    assert code == 0 and json.loads(out)["stopped"] is False


def test_a_daemon_for_another_database_is_not_used(env: Env) -> None:
    _seed(env)
    other = env.tmp / "other.db"
    code, out, err = env.cli("daemon", "start", "--db", str(other), "--json")
    assert code == 0, err
    env.pids.append(json.loads(out)["pid"])
    try:
        assert env.mem("list", *SCOPE) == env.mem("list", *SCOPE, daemon=False)
        code, out, _ = env.cli("daemon", "status", "--db", str(other), "--json")
        assert json.loads(out)["requests"] == 0
    finally:
        env.cli("daemon", "stop", "--db", str(other))


def test_idle_exit(env: Env) -> None:
    pid = env.start("--idle-timeout", "1")["pid"]
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid) and not os.path.exists(env.sock)
    code, out, _ = env.mem("list", *SCOPE)
    assert code == 0 and json.loads(out) == {"memories": []}


def test_status_polls_do_not_keep_an_idle_daemon_alive_and_commands_do(env: Env) -> None:
    pid = env.start("--idle-timeout", "3")["pid"]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4.5:  # a command now and then: it stays
        assert env.mem("list", *SCOPE)[0] == 0
        time.sleep(0.5)
    assert _alive(pid)
    t1 = time.monotonic()
    while _alive(pid) and time.monotonic() - t1 < 30:  # only `daemon status` (a monitor): it goes
        env.cli("daemon", "status", "--db", str(env.db), "--json")
        time.sleep(0.2)
    assert not _alive(pid) and time.monotonic() - t1 < 15


def test_stale_socket_is_removed_and_the_command_runs_in_process(env: Env) -> None:
    ids = _seed(env)
    pid = env.start()["pid"]
    os.kill(pid, signal.SIGKILL)  # no clean-up: the socket file stays behind
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stat.S_ISSOCK(os.lstat(env.sock).st_mode)
    code, out, _ = env.mem("get", ids[1])
    assert code == 0 and json.loads(out)["content"] == "the cat sleeps on the sofa"
    assert not os.path.exists(env.sock)  # detected (refused, lock free) and removed
    assert env.start()["pid"] != pid  # and a new daemon starts in its place


def test_client_refuses_a_socket_or_folder_it_does_not_own(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.start()
    me = os.getuid()
    assert client.owned(env.sock, folder=False) and client.owned(os.path.dirname(env.sock), folder=True)
    monkeypatch.setattr(client.os, "getuid", lambda: me + 4242)  # as another user sees them
    assert not client.owned(env.sock, folder=False)
    assert client.connect(env.sock) is None
    assert os.path.exists(env.sock)  # refused, not treated as stale
    monkeypatch.setattr(client.os, "getuid", lambda: me)
    folder = os.path.dirname(env.sock)
    os.chmod(folder, 0o755)  # others could enter: refused too
    try:
        assert client.connect(env.sock) is None
        code, out, _ = env.mem("list", *SCOPE)
        assert code == 0 and json.loads(out) == {"memories": []}
    finally:
        os.chmod(folder, 0o700)
    assert env.requests() == 0  # the command above ran in-process
    link = os.path.join(folder, "link.sock")
    os.symlink(env.sock, link)
    assert not client.owned(link, folder=False) and client.connect(link) is None


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root (the monkeypatched check above runs always)")
def test_client_refuses_a_socket_chowned_to_another_user(env: Env) -> None:
    env.start()
    os.chown(env.sock, 4242, 4242)
    try:
        code, out, _ = env.mem("list", *SCOPE)
        assert code == 0 and json.loads(out) == {"memories": []}
        assert env.cli("daemon", "status", "--db", str(env.db))[0] == 1  # status refuses it too
    finally:
        os.chown(env.sock, 0, 0)
    assert env.requests() == 0


def test_daemon_refuses_a_peer_of_another_uid() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert _daemon.peer_allowed(a, os.getuid())
        assert not _daemon.peer_allowed(a, os.getuid() + 4242)


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another user needs root to setuid")
def test_daemon_closes_on_a_real_other_user(env: Env) -> None:
    env.start()
    folder = os.path.dirname(env.sock)
    for d in (env.runtime, folder):
        os.chmod(d, 0o711)  # let the other user reach the socket at all: only the peer check stands
    os.chmod(env.sock, 0o666)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: become another user, ask for the status
            try:
                os.setgid(65534)
                os.setuid(65534)
                sock = socket.socket(socket.AF_UNIX)
                sock.settimeout(10)
                sock.connect(env.sock)
                client.send(sock, {"op": "status"})
                os.write(w, b"answer:" + sock.recv(100))
            except BaseException as exc:  # noqa: BLE001
                os.write(w, f"raised:{type(exc).__name__}".encode())
            os._exit(0)
        os.close(w)
        got = b""
        while chunk := os.read(r, 1000):
            got += chunk
        os.close(r)
        os.waitpid(pid, 0)
        # closed without an answer (before or after the request was written)
        assert got in (b"answer:", b"raised:ConnectionResetError", b"raised:BrokenPipeError"), got
    finally:
        for d in (env.runtime, folder):
            os.chmod(d, 0o700)
        os.chmod(env.sock, 0o600)
    assert env.requests() == 0


def test_daemon_runs_routed_commands_only_and_this_version_only(env: Env) -> None:
    env.start()
    base = {"op": "run", "key": client.daemon_key(), "pinned": {k: os.environ.get(k) for k in client.PINNED_ENV},
            "cwd": str(env.tmp), "env": env.env, "umask": 0o022, "argv0": "x",
            "streams": [("utf-8", "strict")] * 3}
    pinned = {k: env.env.get(k) for k in client.PINNED_ENV}
    for hello in ({**base, "pinned": pinned, "argv": ["vault", "list"]},
                  {**base, "pinned": pinned, "argv": ["vault", "sync", "finance"]},
                  {**base, "pinned": pinned, "argv": ["vault", "--db", "x.db", "search", "finance", "q"]},
                  {**base, "pinned": pinned, "argv": ["context", "finance", "--help"]},
                  {**base, "pinned": pinned, "argv": ["memory", "export"]},
                  {**base, "pinned": pinned, "argv": ["memory", "list", *SCOPE], "key": "0|old"},
                  {**base, "pinned": {**pinned, "FORCE_COLOR": "1"}, "argv": ["memory", "list", *SCOPE]}):
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(10)
        with sock:
            sock.connect(env.sock)
            client.send(sock, hello)
            assert client.recv(sock) == {"ok": False}, hello["argv"]
    assert env.requests() == 0


def test_the_real_model_answers_identically(env: Env) -> None:
    env.env["ATOMIC_AGENTS_EMBEDDER"] = "minilm"
    ids = _seed(env)
    args = [["recall", *SCOPE, "the feline naps on the couch"], ["search-hybrid", *SCOPE, "deploy"], ["get", ids[2]]]
    before = [env.mem(*a, daemon=False) for a in args]
    assert env.start()["embedder"] == "minilm"
    assert [env.mem(*a) for a in args] == before
    assert env.requests() == len(args)
    assert json.loads(before[0][1])["results"][0]["id"] == ids[1]


@pytest.mark.parametrize("bad", ["-1", "nan", "inf"])
def test_bad_idle_timeout_is_a_typed_error(env: Env, bad: str) -> None:
    code, out, err = env.cli("daemon", "start", "--db", str(env.db), "--idle-timeout", bad)
    assert code == 1 and err.startswith(b"error: ") and b"idle-timeout" in err
    assert not os.path.exists(env.sock)


def test_start_refuses_a_missing_folder_and_a_dsn(env: Env) -> None:
    code, _, err = env.cli("daemon", "start", "--db", str(env.tmp / "nope" / "m.db"))
    assert code == 1 and b"does not exist" in err
    code, _, err = env.cli("daemon", "start", "--db", "postgresql://u@localhost/x")
    assert code == 1 and b"SQLite" in err


# ------------------------------------------------- context and vault search
GOAL_SCOPE = ["--org-id", "acme", "--workspace-id", "acme/fin", "--agent-id", "dispatcher", "--user-id", "alice"]


def _vault(e: Env) -> tuple[Path, str]:
    """An agents root under the test folder with two agents, a synced mirror and one ATP goal; ``e.db`` is its store."""
    from atomic_agents.atp import Identity, Ledger
    from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore
    from atomic_agents.vault import NoteDraft, Vault

    root = e.tmp / "agents"
    vault = Vault(root)
    ag, _ = vault.init_agent("finance", title="Finance Coach")
    vault.init_agent("blank")  # model.md as scaffolded: no token budget
    model = ag.path / "model.md"
    model.write_text(model.read_text(encoding="utf-8").replace("- Max system prompt: tokens",
                                                               "- Max system prompt: 3000 tokens"), encoding="utf-8")
    (ag.path / "tools.md").write_text("# TOOLS\n\n## Write paths (own folder ONLY)\n- finance/memory/\n\n"
                                      "## Hard NOs\n- Never move money\n", encoding="utf-8")

    def draft(topic: str, type: str = "feedback", **kw: Any) -> NoteDraft:
        return NoteDraft(**{"type": type, "topic": topic, "name": f"Note {topic}", "sources": ["conversation_2026-05-06"],
                            "description": f"When {topic.replace('_', ' ')} matters", "confidence": "high",
                            "body": f"Body of {topic}.\n", **kw})

    ag.create_notes([
        draft("scope_boundary", name="Scope boundary", description="Never give tax advice", pinned=True),
        draft("debt_order", name="Debt order", description="Pay the highest rate debt first"),
        draft("debt_snowball", name="Debt snowball", description="Smallest debt balance first when motivation lags"),
        draft("gym_days", type="user", name="Gym days", description="Trains Monday and Thursday"),
    ])
    (ag.memory_dir / "INDEX_archive.md").write_text("# Archive sub-index\n\n- `Old` — old note\n", encoding="utf-8")
    e.db = root / "_memory" / "memory.db"
    code, _, err = e.cli("vault", "sync", "finance", env={"ATOMIC_AGENTS_DAEMON": "off"})
    assert code == 0, err
    store = SQLiteMemoryStore(e.db, embedder=HashingEmbedder())
    try:
        ledger = Ledger(store, Identity("acme", "acme/fin", "dispatcher"))
        goal = ledger.start("Plan the debt payoff for the credit card", requester="alice").goal_id
        store.remember("The credit card APR is 24 percent, the car loan 6", None, ledger.identity.scope)
    finally:
        store.close()
    return root, goal


def _context_battery(root: Path, goal: str, tight: int) -> list[tuple[list[str], dict[str, str]]]:
    """``context`` and ``vault search`` lines (with extra environment) covering answers, drops and every kind of error."""
    q = ["--query", "which debt first"]
    return [
        (["context", "finance"], {}),  # no store needed: still answered by the daemon
        (["context", "finance", *q], {}),
        (["context", "finance", *q, "--format", "json"], {}),
        (["context", "finance", *q, "--budget", str(tight)], {}),  # recalled notes and sub-index dropped, reported
        (["context", "finance", *q, "--budget", "5"], {}),  # ContextBudgetError naming each part
        (["context", "finance", "--budget", "5", "--format", "json"], {}),
        (["context", "blank", *q], {}),  # model.md has no budget: typed error
        (["context", "nobody", *q], {}),  # unknown agent
        (["context", "Not A Name"], {}),
        (["context", "finance", "--limit", "0"], {}),
        (["context", "finance", "--format", "yaml"], {}),  # usage error, exit 2
        (["context", "finance", "--bogus"], {}),
        (["context"], {}),
        (["context", "finance", *q, "--embedder", "nope"], {}),
        (["context", "finance", "--goal", goal, *GOAL_SCOPE, "--budget", "5000"], {}),
        (["context", "finance", "--goal", goal, *GOAL_SCOPE, *q, "--format", "json"], {}),
        (["context", "finance", "--goal", "no-such-goal", *GOAL_SCOPE], {}),
        (["context", "finance", "--goal", goal], {}),  # no org/workspace: typed error
        (["--agents-root", "agents", "context", "finance", *q], {}),
        (["context", "finance", "--agents-root", str(root), *q], {"ATOMIC_AGENTS_ROOT": "/nowhere"}),
        (["context", "finance", "--db", str(root / "_memory" / "memory.db"), *q], {}),
        (["context", "finance", *q], {"ATOMIC_AGENTS_ROOT": str(root)}),
        (["vault", "search", "finance", "debt"], {}),
        (["vault", "search", "finance", "debt", "--json", "--limit", "2"], {}),
        (["vault", "--agents-root", str(root), "search", "finance", "gym", "--type", "user"], {}),
        (["--agents-root", "/nowhere", "vault", "--agents-root", "agents", "search", "finance", "debt",
          "--include-superseded"], {}),
        (["vault", "search", "finance", "debt", "--sync"], {}),
        (["vault", "search", "finance", "x", "--type", "bogus"], {}),
        (["vault", "search", "finance", "x", "--json", "--limit", "0"], {}),  # the error as JSON on stdout too
        (["vault", "search", "nobody", "x"], {}),
        (["vault", "search", "finance"], {}),  # missing QUERY
        (["vault", "search", "finance", "x", "--embedder", "nope", "--json"], {}),
    ]


def test_context_and_vault_search_identical_with_and_without_the_daemon(env: Env) -> None:
    root, goal = _vault(env)
    code, out, err = env.cli("context", "finance", "--query", "which debt first", "--format", "json",
                             env={"ATOMIC_AGENTS_DAEMON": "off"})
    assert code == 0, err
    parts = json.loads(out)["parts"]
    tight = sum(p["tokens"] for p in parts if p["kind"] not in ("recalled", "sub_index")) + 2
    battery = _context_battery(root, goal, tight)
    off = {"ATOMIC_AGENTS_DAEMON": "off"}
    before = [env.cli(*args, env={**extra, **off}) for args, extra in battery]
    env.start()
    served0 = env.requests()
    during = [env.cli(*args, env=extra) for args, extra in battery]
    assert env.requests() - served0 == len(battery)  # every one went through the daemon
    for (args, _), b, d in zip(battery, before, during):
        assert d == b, args
    assert {code for code, _, _ in before} == {0, 1, 2}  # answers, typed errors and usage errors were all compared
    assert b"\ndropped " in before[3][2] and b"over the budget of 5" in before[5][2]
    assert b"Scope boundary" in before[0][1] and b"Plan the debt payoff" in before[14][1]
    assert json.loads(before[23][1])["hits"][0]["path"].startswith("memory/feedback_debt_")
    code, data = env.status()
    assert {"context", "vault search"} <= set(data["ms_per_request"])


def test_hand_edits_and_other_writers_are_in_the_daemons_next_context(env: Env) -> None:
    root, _ = _vault(env)
    env.start()
    line = ["context", "finance", "--query", "which debt first", "--format", "json"]
    for _ in range(3):  # from the daemon's second look the notes folder is watched: later looks see only events
        assert env.cli(*line)[0] == 0
    memory = root / "finance" / "memory"
    gym = memory / "user_gym_days.md"
    gym.write_text(gym.read_text(encoding="utf-8").replace("pinned: false", "pinned: true"),
                   encoding="utf-8")  # pinned by hand
    (memory / "feedback_scope_boundary.md").unlink()  # a pinned note removed
    (memory / "INDEX_more.md").write_text("# More\n\n- `New` — a new sub-index\n", encoding="utf-8")
    code, _, err = env.cli("vault", "new", "finance", "--type", "feedback", "--topic", "debt_avalanche", "--name",
                           "Debt avalanche", "--description", "Highest interest first saves the most",
                           "--source", "conversation_2026-05-06", "--confidence", "high",
                           env={"ATOMIC_AGENTS_DAEMON": "off"})  # another process writes a note (and its mirror)
    assert code == 0, err
    served = env.requests()
    for args in (line, ["context", "finance"], ["vault", "search", "finance", "debt avalanche", "--json"]):
        warm = env.cli(*args)
        assert warm == env.cli(*args, env={"ATOMIC_AGENTS_DAEMON": "off"}), args
    assert env.requests() - served == 3
    data = json.loads(env.cli(*line)[1])
    sources = [p["source"] for p in data["parts"]]
    assert "memory/user_gym_days.md" in sources and "memory/feedback_scope_boundary.md" not in sources
    assert "memory/INDEX_more.md" in sources
    assert "Debt avalanche" in env.cli("vault", "search", "finance", "debt avalanche")[1].decode()


def test_settings_read_once_per_process_must_match_the_daemons(env: Env) -> None:
    _vault(env)
    env.start()
    wordpiece = {"ATOMIC_AGENTS_TOKENIZER": "wordpiece"}
    code, out, err = env.cli("context", "finance", "--format", "json", env=wordpiece)
    assert code == 0, err
    assert "WordPiece" in json.loads(out)["tokenizer"]
    assert (code, out, err) == env.cli("context", "finance", "--format", "json",
                                       env={**wordpiece, "ATOMIC_AGENTS_DAEMON": "off"})
    ann = {"ATOMIC_AGENTS_ANN_THRESHOLD": "1"}  # the daemon's store chose its tier when it opened
    assert env.cli("vault", "search", "finance", "debt", env=ann) == env.cli(
        "vault", "search", "finance", "debt", env={**ann, "ATOMIC_AGENTS_DAEMON": "off"})
    assert env.requests() == 0  # neither was sent to the daemon
    assert env.cli("context", "finance")[0] == 0 and env.requests() == 1  # the daemon's own settings: served


class _DyingDaemon:
    """A fake daemon on the database's socket: acknowledges a command, reads its stdin, then closes unanswered."""

    def __init__(self, path: str) -> None:
        import threading

        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(4)
        self.seen: list[list[str]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        hello = client.recv(conn)
        self.seen.append(hello["argv"])
        client.send(conn, {"ok": True})
        client.recv_bytes(conn)  # the stdin frame; then the "daemon" dies

    def close(self) -> None:
        self.server.close()


def test_a_daemon_dying_mid_request_runs_context_and_search_again_in_process(env: Env) -> None:
    _vault(env)
    fake = _DyingDaemon(env.sock)
    try:
        off = {"ATOMIC_AGENTS_DAEMON": "off"}
        for args in (["context", "finance", "--query", "which debt first"], ["vault", "search", "finance", "debt"],
                     ["vault", "search", "finance", "debt", "--sync"], ["context", "nobody"]):
            assert env.cli(*args) == env.cli(*args, env=off), args
        assert len(fake.seen) == 4  # each was sent to the "daemon" first
        code, out, err = env.mem("remember", *SCOPE, "written once")  # a write is not run twice
        assert code == 1 and b"may or may not have taken effect" in err and out == b""
        assert len(fake.seen) == 5
    finally:
        fake.close()
        os.unlink(env.sock)


def test_resolve_db_for_context_and_vault_search(tmp_path: Path) -> None:
    cwd = str(tmp_path)

    def db(*args: str, **environ: str) -> tuple[str, str] | None:
        return client.resolve_db(list(args), environ, cwd)

    default = os.path.join(cwd, "agents", "_memory", "memory.db")
    assert db("context", "finance") == ("context", default)
    assert db("context", "finance", "--query", "x", "--db", "m.db") == ("context", os.path.join(cwd, "m.db"))
    assert db("context", "finance", "--query", "--db") == ("context", default)  # a value, as click reads it
    assert db("--agents-root", "r", "context", "a", "--agents-root", "s") == ("context", f"{cwd}/s/_memory/memory.db")
    assert db("--agents-root=r", "context", "a") == ("context", f"{cwd}/r/_memory/memory.db")
    assert db("context", "a", ATOMIC_AGENTS_ROOT="/e") == ("context", "/e/_memory/memory.db")
    assert db("context", "a", "--agents-root", "r", ATOMIC_AGENTS_DB="/x/m.db") == ("context", "/x/m.db")
    assert db("context", "a", "--db", "/y.db", ATOMIC_AGENTS_DB="/x/m.db") == ("context", "/y.db")
    assert db("vault", "search", "a", "q") == ("vault search", default)
    assert db("--agents-root", "r", "vault", "--agents-root", "s", "search", "a", "q") == (
        "vault search", f"{cwd}/s/_memory/memory.db")
    assert db("vault", "--agents-root", "s", "search", "a", "q", "--agents-root", "t") == (
        "vault search", f"{cwd}/t/_memory/memory.db")
    # flags take no value: the --db after them is read
    assert db("vault", "search", "a", "--sync", "--db", "d.db", "q") == ("vault search", f"{cwd}/d.db")
    assert db("vault", "search", "a", "--include-superseded", "--json", "--db=d.db", "q") == ("vault search", f"{cwd}/d.db")
    for line in (["vault", "--db", "d.db", "search", "a", "q"],  # not an option of the vault group: in-process
                 ["vault", "list"], ["vault", "sync"], ["vault"], ["context", "a", "--help"], ["--json", "context", "a"],
                 ["context", "a", "--db", "postgresql://u@h/x"], ["context", "a", "--db"], ["team", "context"]):
        assert db(*line) is None, line
    assert db("memory", "--db", "m.db", "list") == ("list", f"{cwd}/m.db")  # the memory group as before


# --------------------------------------------------------- stdin and a busy daemon
def _popen(e: Env, *args: str) -> subprocess.Popen[bytes]:
    """A command with its stdin a pipe this test writes (and closes) when it wants."""
    return subprocess.Popen([sys.executable, "-m", "atomic_agents.cli", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e.env, cwd=e.tmp)


def _reap(p: subprocess.Popen[bytes]) -> None:
    """Kill ``p`` if it still runs, wait for it, close its pipes."""
    if p.poll() is None:
        p.kill()
    p.wait()
    for f in (p.stdin, p.stdout, p.stderr):
        if f is not None and not f.closed:
            f.close()


def _contents(e: Env) -> list[str]:
    code, out, err = e.mem("list", *SCOPE, daemon=False)
    assert code == 0, err
    return [m["content"] for m in json.loads(out)["memories"]]


def test_stdin_as_opt_equals_dash_and_as_a_path_naming_stdin(env: Env) -> None:
    """``--jsonl=-`` (and ``--content=-``, ``--query=-``) send stdin; ``/dev/stdin`` and kin run in-process.

    The client sent stdin only for an argument exactly ``-``: ``--jsonl=-`` reached the
    daemon with an empty stdin, and ``--jsonl /dev/stdin`` was opened in the daemon,
    whose stdin is /dev/null: nothing stored, exit 0.
    """
    env.start()
    served = env.requests()
    for args, stdin in ((["--jsonl=-"], b'{"content": "alpha jsonl"}\n'), (["--content=-"], b"alpha content\n"),
                        (["--fact=-"], b"alpha fact")):
        code, out, err = env.mem("remember", *SCOPE, *args, stdin=stdin)
        assert code == 0 and err == b"" and json.loads(out)["status"] == "remembered", args
    assert env.requests() - served == 3  # through the daemon, stdin sent
    assert _contents(env) == ["alpha jsonl", "alpha content\n", "alpha fact"]
    for cmd in ("recall", "search", "search-hybrid"):
        line = [cmd, *SCOPE, "--query=-", "--limit", "2"]
        assert env.mem(*line, stdin=b"alpha content") == env.mem(*line, stdin=b"alpha content", daemon=False), cmd
    recall = ["recall", *SCOPE, "--jsonl=-"]
    assert env.mem(*recall, stdin=b'{"query": "fact"}\n') == env.mem(*recall, stdin=b'{"query": "fact"}\n', daemon=False)
    served = env.requests()
    for n, args in enumerate((["--jsonl", "/dev/stdin"], ["--jsonl", "/dev/fd/0"], ["--jsonl", "/proc/self/fd/0"],
                              ["--jsonl=/dev/stdin"], ["--jsonl", "//dev/./stdin"])):
        code, out, err = env.mem("remember", *SCOPE, *args, stdin=f'{{"content": "path {n}"}}\n'.encode())
        assert code == 0 and err == b"" and json.loads(out)["status"] == "remembered", args
    link = env.tmp / "in.jsonl"
    link.symlink_to("/dev/stdin")  # a link to it is stdin too
    assert env.mem("remember", *SCOPE, "--jsonl", str(link), stdin=b'{"content": "path 5"}\n')[0] == 0
    assert env.requests() == served  # each ran in-process, where the file is the client's stdin
    assert _contents(env)[3:] == [f"path {n}" for n in range(6)]


def test_reads_stdin_only_for_the_dash_a_command_reads() -> None:
    for command, args, want in [
        ("remember", ["--content", "-"], True), ("remember", ["--content=-"], True), ("remember", ["-"], True),
        ("remember", ["--jsonl=-", "--agent-id", "a"], True), ("remember", ["--", "-"], True),
        ("remember", ["--agent-id", "-", "--user-id", "u", "text"], False),
        ("remember", ["--content", "x", "-"], False),  # the option wins over the argument (cli/_memory.py _text)
        ("remember", ["-", "--content", "x"], False),
        ("remember", ["--jsonl", "f.jsonl", "--content", "-"], False),  # --jsonl is all that is read
        ("remember", ["--jsonl", "-", "--metadata", "{}"], False),  # refused, unread
        ("recall", ["--query", "-"], True), ("recall", ["--topic=-"], True), ("recall", ["--jsonl", "-"], True),
        ("recall", ["--agent-id", "-", "q"], False), ("recall", ["--filter", "-", "q"], False),
        ("recall", ["--query", "--", "-"], False),  # "--" is --query's value: "-" is an extra argument
        ("search", ["--keywords", "-"], True), ("search", ["--jsonl", "-", "q"], False),
        ("search-hybrid", ["--rerank", "-"], True), ("search-semantic", ["--limit", "-", "q"], False),
        ("list", ["--agent-id", "-", "--user-id", "-"], False), ("get", ["-"], False), ("forget", ["-"], False),
        ("edit", ["x", "--content", "-"], False),  # edit's --content is the text itself
        ("context", ["-", "--query", "-"], False), ("vault search", ["a", "-"], False),
    ]:
        assert client.reads_stdin(command, args) is want, (command, args)


def test_a_dash_that_is_an_option_value_does_not_wait_for_stdin(env: Env) -> None:
    """``memory list --agent-id -`` reads no stdin: it answered only once stdin closed (``< <(sleep 6)``: 6 s)."""
    env.start()
    served = env.requests()
    line = ["memory", "--db", str(env.db), "list", "--agent-id", "-", "--user-id", "-"]
    p = _popen(env, *line)
    try:
        deadline = time.monotonic() + 20
        while p.poll() is None and time.monotonic() < deadline:  # its stdin stays open all along
            time.sleep(0.05)
        assert p.returncode == 0, "still waiting for the end of a stdin it never reads"
        assert p.stdout is not None and p.stderr is not None
        out, err = p.stdout.read(), p.stderr.read()
    finally:
        _reap(p)
    assert (0, out, err) == env.mem("list", "--agent-id", "-", "--user-id", "-", daemon=False)
    assert env.requests() - served == 1


def test_slow_stdin_neither_holds_the_daemon_nor_fails_the_write(env: Env) -> None:
    """Stdin written slowly (here: held open while other commands run) is read before the client connects.

    The client connected, sent its hello and then read stdin: the daemon (one request at a
    time) waited for it, everyone else ran in-process, and past the daemon's 30 s the write
    failed with "may or may not have taken effect" although nothing ran.
    """
    env.start()
    served = env.requests()
    p = _popen(env, "memory", "--db", str(env.db), "remember", *SCOPE, "--content", "-")
    try:
        assert p.stdin is not None
        p.stdin.write(b"slow ")
        p.stdin.flush()
        time.sleep(1.0)  # the client is waiting on its stdin
        code, out, err = env.mem("list", *SCOPE)
        assert code == 0 and json.loads(out) == {"memories": []}, err
        code, data = env.status()
        assert code == 0 and not data.get("busy")
        assert data["requests"] - served == 1  # the list went through the daemon: nobody holds it
        p.stdin.write(b"writer")
        p.stdin.close()
        assert p.wait(timeout=60) == 0
        assert p.stdout is not None and p.stderr is not None
        out, err = p.stdout.read(), p.stderr.read()
    finally:
        _reap(p)
    assert err == b"" and json.loads(out)["status"] == "remembered"
    assert _contents(env) == ["slow writer"]
    assert env.requests() - served == 2


def test_the_daemon_drops_a_client_that_never_sends_its_whole_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """One deadline for the whole request: a client trickling bytes cannot hold the daemon (one at a time) forever."""
    import threading

    monkeypatch.setattr(_daemon, "RECEIVE_TIMEOUT", 0.5)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stop = threading.Event()

    def trickle() -> None:  # the frame's length, then one byte per 0.1 s (each recv alone well within any limit)
        try:
            b.sendall((100).to_bytes(8, "big"))
            while not stop.wait(0.1):
                b.sendall(b"x")
        except OSError:
            pass

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            _daemon._handle(a, None, os.getuid())  # type: ignore[arg-type]
    finally:
        stop.set()
        t.join()
        a.close()
        b.close()
    assert time.monotonic() - t0 < 3


class _ClosingDaemon(_DyingDaemon):
    """A fake daemon that acknowledges a command and closes before it could receive the stdin frame."""

    def _answer(self, conn: socket.socket) -> None:
        self.seen.append(client.recv(conn)["argv"])
        conn.shutdown(socket.SHUT_RD)  # gone for what follows: the client's stdin frame cannot be sent
        client.send(conn, {"ok": True})


def test_a_request_the_daemon_did_not_receive_whole_runs_in_process(env: Env) -> None:
    """A stdin frame that cannot be sent means nothing ran: the write runs in-process, not "may or may not"."""
    fake = _ClosingDaemon(env.sock)
    try:
        code, out, err = env.mem("remember", *SCOPE, "--content", "-", stdin=b"written once\n")
        assert len(fake.seen) == 1  # it was offered to the "daemon" first
        assert code == 0 and err == b"" and json.loads(out)["status"] == "remembered", err
    finally:
        fake.close()
        os.unlink(env.sock)
    assert _contents(env) == ["written once\n"]  # in-process, with the stdin the client had read


def _hold(e: Env) -> socket.socket:
    """A raw client that has the daemon acknowledge a ``list`` and then keeps it waiting for the stdin frame."""
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(30)
    sock.connect(e.sock)
    client.send(sock, {"op": "run", "key": client.daemon_key(), "pinned": {k: e.env.get(k) for k in client.PINNED_ENV},
                       "cwd": str(e.tmp), "env": e.env, "umask": 0o022, "argv0": "x",
                       "argv": ["memory", "--db", str(e.db), "list", *SCOPE], "streams": [("utf-8", "strict")] * 3})
    assert client.recv(sock) == {"ok": True}
    return sock


def _finish(sock: socket.socket) -> int:
    client.send(sock, b"")
    reply = client.recv(sock)
    client.recv_bytes(sock), client.recv_bytes(sock)
    return int(reply["code"])


def test_status_and_stop_of_a_busy_daemon(env: Env) -> None:
    """A daemon busy for more than 2 s is running: status says so (exit 0), stop waits for it and stops it.

    They said "no daemon running" (status exit 1; stop did nothing, exit 0) once the
    daemon had not answered within 2 s.
    """
    pid = env.start()["pid"]
    held = _hold(env)
    try:
        code, data = env.status()
        assert code == 0 and data["running"] is True and data["busy"] is True and data["pid"] == pid, data
        assert data["db"] == os.path.realpath(env.db) and data["socket"] == env.sock
        code, out, _ = env.cli("daemon", "status", "--db", str(env.db))
        assert code == 0 and b"busy" in out and str(pid).encode() in out
        code, out, err = env.cli("daemon", "start", "--db", str(env.db), "--json")
        assert code == 0 and json.loads(out)["pid"] == pid, err  # the running one, no second daemon
        stopper = subprocess.Popen([sys.executable, "-m", "atomic_agents.cli", "daemon", "stop", "--db", str(env.db),
                                    "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.tmp)
        time.sleep(3.0)  # longer than the 2 s after which it gave up
        assert stopper.poll() is None and _alive(pid)  # waiting for the daemon, which is still busy
        assert _finish(held) == 0  # the request in progress completes...
        out, err = stopper.communicate(timeout=60)
    finally:
        held.close()
    assert stopper.returncode == 0, err
    data = json.loads(out)
    assert data["stopped"] is True and data["pid"] == pid  # ...then the stop is taken
    assert not _alive(pid) and not os.path.exists(env.sock)


def _send_raw(sock_path: str, frame: bytes) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(sock_path)
        s.sendall(frame)
        with __import__("contextlib").suppress(OSError):
            s.recv(64)  # the daemon's answer or its close
    finally:
        s.close()


def test_a_request_of_the_wrong_shape_drops_that_client_and_the_daemon_serves_on(env: Env) -> None:
    import marshal

    _seed(env)
    pid = env.start()["pid"]
    for hello in ({"op": "run", "argv": [1, 2]}, {"op": "run", "env": ["x"], "argv": ["memory", "list"]},
                  {"op": "run", "argv": ["memory", "list"], "cwd": 5}, ["not", "a", "dict"], {"op": 7}):
        data = marshal.dumps(hello)
        _send_raw(env.sock, len(data).to_bytes(8, "big") + data)
        assert _alive(pid), hello
    _send_raw(env.sock, (client.MAX_HELLO + 1).to_bytes(8, "big") + b"x" * 1024)  # refused before it is read
    assert _alive(pid)
    served = env.requests()
    code, out, _ = env.mem("recall", *SCOPE, "billing deploy")
    assert code == 0 and b"billing deploy" in out and env.requests() == served + 1


def test_a_closed_stderr_runs_in_process_and_a_write_that_worked_exits_0(env: Env) -> None:
    env.start()
    served = env.requests()
    import shlex

    line = shlex.join([sys.executable, "-m", "atomic_agents.cli", "memory", "--db", str(env.db), "remember", *SCOPE,
                       "stored with stderr closed"])
    p = subprocess.run(["bash", "-c", f"exec {line} 2>&-"], stdout=subprocess.PIPE, env=env.env, cwd=env.tmp, timeout=120)
    assert p.returncode == 0 and b'"id"' in p.stdout
    code, out, _ = env.mem("list", *SCOPE)
    assert code == 0 and out.count(b"stored with stderr closed") == 1  # stored once
    assert env.requests() == served + 1  # (the list; the remember ran in-process)


def test_health_is_the_same_before_and_after_the_daemon_has_searched(env: Env) -> None:
    _seed(env)
    before = env.mem("health", daemon=False)
    env.start()
    assert env.mem("recall", *SCOPE, "billing")[0] == 0
    after = env.mem("health")
    b, a = json.loads(before[1]), json.loads(after[1])
    assert a["extra"]["ann"] == b["extra"]["ann"] == "below-threshold"
    assert {k: v for k, v in a.items() if k != "size_bytes"} == {k: v for k, v in b.items() if k != "size_bytes"}


def test_start_goes_on_when_the_lock_was_held_only_for_a_moment(env: Env) -> None:
    import fcntl
    import threading

    _seed(env)
    lock = client.lock_path(os.path.realpath(env.db))
    os.makedirs(os.path.dirname(lock), mode=0o700, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a stale check or a daemon on its way out holds it
    threading.Timer(1.5, lambda: os.close(fd)).start()
    t0 = time.monotonic()
    data = env.start()
    assert data["running"] and _alive(data["pid"]) and time.monotonic() - t0 < 60

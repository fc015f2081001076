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


def test_daemon_runs_memory_commands_only_and_this_version_only(env: Env) -> None:
    env.start()
    base = {"op": "run", "key": client.daemon_key(), "pinned": {k: os.environ.get(k) for k in client.PINNED_ENV},
            "cwd": str(env.tmp), "env": env.env, "umask": 0o022, "argv0": "x",
            "streams": [("utf-8", "strict")] * 3}
    pinned = {k: env.env.get(k) for k in client.PINNED_ENV}
    for hello in ({**base, "pinned": pinned, "argv": ["vault", "list"]},
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

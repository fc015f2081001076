"""`atomic-agents daemon start|stop|status`: one warm store and model per database, behind a Unix socket.

While a daemon runs for a database, ``memory`` commands, ``context`` and ``vault search``
for it go through it (the lean client, ``atomic_agents/_daemon_client.py``, called by
:func:`atomic_agents.cli.main` before typer is imported). The daemon runs the very same typer app in-process with the
client's argv, working folder, environment, umask and stdin, stdout/stderr captured, so
its answers are the in-process ones byte for byte; :func:`served_store` hands the
memory commands its open store (``cli/_memory.py``'s ``_store``; :func:`command_store`
for ``context`` and ``vault search``) when the command targets the daemon's database
with the daemon's embedder, else they open their own. A context also finds the
process's vault state warm: the tokenizer, the token-count cache and, from the second
look, the notes folder's inotify watch (``vault/_watch.py``).
The store pulls other processes' writes by ``rev`` before each search, so the warm
store stays correct while others write.

Security: the socket lives in a folder of mode 0700 (``$XDG_RUNTIME_DIR/atomic-agents``,
else ``/tmp/atomic-agents-<uid>``), has mode 0600, and the daemon refuses a peer of
another uid (``SO_PEERCRED``); the client refuses a socket or folder it does not own.
The daemon runs the routed commands only (``_daemon_client.resolve_db``). One daemon per database: it holds an
``flock`` on ``<hash>.lock`` for its whole life; a socket nobody listens on while the
lock is free is stale and removed. Requests are served one at a time (the store and
the app are not shared between threads): meanwhile ``daemon status`` reports it busy and
``daemon stop`` waits for the request to end. It exits after ``--idle-timeout`` seconds
without a request, on ``daemon stop``, on SIGTERM, or when its socket is removed.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import _daemon_client as client
from ..exceptions import AtomicAgentsError, StoreError, ValidationError
from ._common import agents_root, db_path, embedder_name, emit, shared

if TYPE_CHECKING:
    from ..memory import MemoryStore

__all__ = ["app", "command_store", "served_store"]

app = typer.Typer(help="A warm memory store per database: memory commands, context and vault search answer "
                       "without loading the model.",
                  no_args_is_help=True)

DEFAULT_IDLE = 900.0
START_TIMEOUT = 180.0
_TICK = 5.0
#: How long a client has to send its whole request (hello and stdin frame, one deadline for both): the
#: client reads its stdin before it connects, so only a stuck or hostile one takes this long, and while
#: it does the daemon serves no one else.
RECEIVE_TIMEOUT = 30.0
#: How long ``daemon stop`` waits for a busy daemon to finish its request and take the stop.
STOP_TIMEOUT = client.REPLY_TIMEOUT + 30.0


class _Stop(BaseException):
    """Raised in the serving loop to exit (``daemon stop``, SIGTERM); not caught by the CLI's boundary."""


class _Served:
    """The daemon's one database: its open store and what ``daemon status`` reports."""

    def __init__(self, db: str, embedder: str, store: MemoryStore, idle_timeout: float, socket: str) -> None:
        self.db, self.embedder, self.store, self.socket = db, embedder, store, socket
        self.ident = _ident(db)
        self.started = time.time()
        self.idle_timeout = idle_timeout
        self.requests = 0
        self.busy: dict[str, list[float]] = {}  # command -> [count, seconds spent running it]


_SERVED: list[_Served] = []


def _ident(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


def _open(db: str, embedder: str) -> MemoryStore:
    from ..memory import SQLiteMemoryStore, embedder_from_name

    return SQLiteMemoryStore(Path(db), embedder=embedder_from_name(embedder))


def served_store(embeds: bool, *, durability: bool = True) -> MemoryStore | None:
    """Inside the daemon: its open store, if the running command targets its database and embedder; else ``None``.

    The database is resolved with the checks (and errors) of ``open_store``; a store file
    replaced underneath (another inode) is reopened. ``durability``: the command honours
    ``--durability`` / ``$ATOMIC_AGENTS_DURABILITY`` (the memory commands; ``context`` and
    ``vault search`` always open a durable store, as the daemon's is).
    """
    if not _SERVED:
        return None
    s = _SERVED[0]
    name = embedder_name() if embeds else (os.environ.get("ATOMIC_AGENTS_EMBEDDER") or "minilm")
    if name.strip().lower() != s.embedder:
        return None
    from . import _common

    durable = getattr(_common, "durable", None)  # --durability (where the CLI has it): the daemon's store is durable
    if durability and callable(durable) and durable() is False:
        return None
    from ..memory._store import _checked_db_path, _is_dsn

    path = db_path()
    target = os.fspath(path) if path is not None else os.environ.get("ATOMIC_AGENTS_DB")
    if isinstance(target, str) and _is_dsn(target):
        return None
    if os.path.realpath(_checked_db_path(path, agents_root())) != s.db:
        return None
    ident = _ident(s.db)
    if ident != s.ident:  # deleted or replaced by another file: open what is there now
        s.store.close()
        s.store = _open(s.db, s.embedder)
        s.ident = _ident(s.db)
    return s.store


@contextlib.contextmanager
def command_store(open_own: Callable[[], MemoryStore]) -> Iterator[MemoryStore]:
    """The store of ``context`` and ``vault search``: the daemon's warm one when it is theirs, else ``open_own()``.

    The command's own store is closed after; the daemon's stays open. Outside the daemon
    this is ``open_own()`` and ``close()``, as before.
    """
    served = served_store(True, durability=False)
    if served is not None:
        yield served
        return
    store = open_own()
    try:
        yield store
    finally:
        store.close()


# ------------------------------------------------------------------ serving
def _peer_uid(conn: Any) -> int | None:
    """The uid of the process at the other end of a Unix socket (``None`` where the OS cannot tell)."""
    import socket
    import struct

    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:  # pragma: no cover - not Linux: the 0700 folder and 0600 socket still hold
        return None
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    return int(uid)


def peer_allowed(conn: Any, uid: int) -> bool:
    peer = _peer_uid(conn)
    return peer is None or peer == uid


class _Capture(io.TextIOWrapper):
    def __init__(self, data: bytes, encoding: str, errors: str) -> None:
        super().__init__(io.BytesIO(data), encoding=encoding, errors=errors, newline="\n")

    def value(self) -> bytes:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue()


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


_COMMAND: list[Any] = []


def _command() -> Any:
    """The root app as ``Typer.__call__`` runs it, its click command built once (typer rebuilds it per call)."""
    if not _COMMAND:
        from typer.main import get_command

        from ._app import app as root_app

        cmd = get_command(root_app)

        def call(**kwargs: Any) -> Any:
            try:
                return cmd(**kwargs)
            except Exception as exc:  # as Typer.__call__: the app's exception settings ride on the error
                from typer.main import DeveloperExceptionConfig, _typer_developer_exception_attr_name

                setattr(exc, _typer_developer_exception_attr_name, DeveloperExceptionConfig(
                    pretty_exceptions_enable=root_app.pretty_exceptions_enable,
                    pretty_exceptions_show_locals=root_app.pretty_exceptions_show_locals,
                    pretty_exceptions_short=root_app.pretty_exceptions_short))
                raise

        _COMMAND.append(call)
    return _COMMAND[0]


def _run_captured(hello: dict[str, Any], stdin: bytes) -> tuple[int, bytes, bytes]:
    """Run the client's command line here as ``main`` would in its process; (exit code, stdout, stderr)."""
    from ._common import run

    saved = (dict(os.environ), os.getcwd(), sys.stdin, sys.stdout, sys.stderr, sys.argv)
    (ie, ier), (oe, oer), (ee, eer) = hello["streams"]
    out, err = _Capture(b"", oe, oer), _Capture(b"", ee, eer)
    tz = os.environ.get("TZ")
    mask = os.umask(int(hello["umask"]))
    try:
        os.environ.clear()
        os.environ.update(hello["env"])
        if os.environ.get("TZ") != tz:
            time.tzset()
        os.chdir(hello["cwd"])
        sys.stdin, sys.stdout, sys.stderr = _Capture(stdin, ie, ier), out, err
        sys.argv = [hello["argv0"], *hello["argv"]]
        try:
            run(_command(), list(hello["argv"]), prog_name="atomic-agents")
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except (_Stop, KeyboardInterrupt):
            raise
        except BaseException:  # a bug, as it would show in-process: a traceback on stderr, exit 1
            import traceback

            traceback.print_exc()
            code = 1
        return code, out.value(), err.value()
    finally:
        env, cwd, sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
        os.umask(mask)
        os.environ.clear()
        os.environ.update(env)
        if os.environ.get("TZ") != tz:
            time.tzset()
        try:
            os.chdir(cwd)
        except OSError:  # pragma: no cover
            os.chdir("/")


def _status(s: _Served) -> dict[str, Any]:
    return {
        "running": True,
        "pid": os.getpid(),
        "db": s.db,
        "socket": s.socket,
        "embedder": s.embedder,
        "uptime_s": round(time.time() - s.started, 3),
        "requests": s.requests,
        "ms_per_request": {cmd: round(1000 * t / n, 2) for cmd, (n, t) in sorted(s.busy.items())},
        "idle_timeout_s": s.idle_timeout,
    }


def _handle(conn: Any, s: _Served, uid: int) -> bool:
    """Serve one connection; whether it ran a command (only that counts as use for the idle timer)."""
    deadline = time.monotonic() + RECEIVE_TIMEOUT
    conn.settimeout(RECEIVE_TIMEOUT)  # the sends (sendall: one limit for all of it)
    if not peer_allowed(conn, uid):
        return False
    hello = client.recv(conn, deadline, limit=client.MAX_HELLO)
    if not isinstance(hello, dict):
        return False
    op = hello.get("op")
    if op == "status":
        client.send(conn, _status(s))
        return False
    if op == "stop":
        client.send(conn, {**_status(s), "running": False})
        raise _Stop
    if op != "run":
        return False
    pinned = {k: os.environ.get(k) for k in client.PINNED_ENV}
    argv = hello.get("argv")
    routed = client.resolve_db(argv, hello.get("env") or {}, str(hello.get("cwd"))) if isinstance(argv, list) else None
    ok = (hello.get("key") == client.daemon_key() and hello.get("pinned") == pinned and routed is not None
          and os.path.isdir(str(hello.get("cwd"))))  # memory commands only
    client.send(conn, {"ok": ok})
    if not ok or routed is None:
        return False
    stdin = client.recv_bytes(conn, deadline)  # the whole request is here: only now is anything run
    conn.settimeout(RECEIVE_TIMEOUT)
    t0 = time.perf_counter()
    code, out, err = _run_captured(hello, stdin)
    n_t = s.busy.setdefault(routed[0], [0, 0.0])
    n_t[0] += 1
    n_t[1] += time.perf_counter() - t0
    s.requests += 1
    client.send(conn, {"code": code})
    client.send(conn, out)
    client.send(conn, err)
    return True


def _prepare_dir() -> str:
    """The socket folder, made 0700 if missing; refused if it is not this user's or others can enter it."""
    d = client.runtime_dir()
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    if not client.owned(d, folder=True):
        raise StoreError(f"{d} is not a folder of this user with mode 0700: refusing to put the daemon's socket there")
    return d


def serve(db: str, embedder: str, idle_timeout: float, *, ready: Any = None) -> None:
    """Serve ``db`` until idle, stopped or signalled (the daemon process's main loop)."""
    import fcntl
    import signal
    import socket

    _prepare_dir()
    sock_path, lock_file = client.socket_path(db), client.lock_path(db)
    if len(os.fsencode(sock_path)) > 100:
        raise StoreError(f"socket path {sock_path} is too long for a Unix socket (set XDG_RUNTIME_DIR to a shorter folder)")
    lock_fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        raise _AlreadyRunning from None
    _command()  # the whole CLI, imported and built once

    store = _open(db, embedder)
    # Load the model now, not at the first request (the default model: its folded session too).
    warm = getattr(store.embedder, "warm", None)
    warm() if callable(warm) else store.embedder.embed_batch(["warm up"])
    try:
        os.unlink(sock_path)  # we hold the lock: any socket there is stale
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        server.bind(sock_path)
    finally:
        os.umask(old_mask)
    os.chmod(sock_path, 0o600)
    server.listen(16)
    mine = _ident(sock_path)
    s = _Served(db, embedder, store, idle_timeout, sock_path)
    _SERVED[:] = [s]
    uid = os.getuid()

    def _term(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, _term)
    if ready is not None:
        ready()
    last = time.monotonic()
    try:
        while True:
            if idle_timeout > 0:
                left = idle_timeout - (time.monotonic() - last)
                if left <= 0:
                    break
                server.settimeout(min(left, _TICK))
            else:
                server.settimeout(_TICK)
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if _ident(sock_path) != mine:  # the socket was removed or replaced: nobody can reach us
                    break
                continue
            ran = False
            try:
                ran = _handle(conn, s, uid)
            except Exception:  # noqa: BLE001 - a client that went away, or sent a request of the wrong shape:
                pass  # that one is dropped and the next served (_Stop is a BaseException: it still ends the loop)
            finally:
                conn.close()
                if ran:  # a command: `daemon status` (a monitor polling it) keeps no daemon alive
                    last = time.monotonic()
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _SERVED.clear()
        if _ident(sock_path) == mine:
            os.unlink(sock_path)
        server.close()
        s.store.close()
        os.close(lock_fd)


class _AlreadyRunning(Exception):
    pass


_ALREADY = 3


def _child_main() -> None:
    """Entry of the daemon process (``daemon start`` spawns it): serve, errors as one line on stderr."""
    db, embedder, idle = sys.argv[1], sys.argv[2], float(sys.argv[3])

    def ready() -> None:  # the parent waits on the socket; our stdio goes quiet for good
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)

    try:
        serve(db, embedder, idle, ready=ready)
    except _AlreadyRunning:
        sys.exit(_ALREADY)
    except (AtomicAgentsError, OSError) as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(1)


# ----------------------------------------------------------------- commands
IdleTimeout = Annotated[float, typer.Option("--idle-timeout", metavar="SECONDS",
                                            help="Exit after this long without a request (0: never).")]


def _target(*, checked: bool = True) -> str:
    """The database the daemon commands name, resolved as the memory commands resolve it.

    ``checked``: with ``open_store``'s checks (and its ``_memory/`` folder); ``stop`` and
    ``status`` only compute the path.
    """
    from ..memory._store import _checked_db_path, _is_dsn, default_db_path

    path = db_path()
    target = os.fspath(path) if path is not None else os.environ.get("ATOMIC_AGENTS_DB")
    if isinstance(target, str) and _is_dsn(target):
        raise ValidationError("the daemon serves SQLite stores; a PostgreSQL store is shared already", field="db",
                              rule="sqlite-only")
    if checked:
        return os.path.realpath(_checked_db_path(path, agents_root()))
    return os.path.realpath(path if path is not None else default_db_path(agents_root()))


def _human(data: dict[str, Any]) -> None:
    if data.get("busy"):
        sys.stdout.write(f"daemon running for {data['db']} (pid {data['pid']}, socket {data['socket']}, "
                         f"busy with a request)\n")
    elif data.get("running"):
        sys.stdout.write(f"daemon running for {data['db']} (pid {data['pid']}, socket {data['socket']}, "
                         f"{data['requests']} requests served)\n")
    else:
        sys.stdout.write(f"no daemon running for {data['db']}\n")


@app.command()
@shared("agents_root", "db", "json", "embedder")
def start(idle_timeout: IdleTimeout = DEFAULT_IDLE) -> None:
    """Start the daemon for the memory store (--db / --agents-root, as memory commands); waits until it answers."""
    from ._common import wants_json

    if os.name != "posix":  # pragma: no cover
        raise StoreError("the daemon needs Unix sockets (Linux, macOS)")
    if not 0 <= idle_timeout < float("inf"):  # NaN fails this too
        raise ValidationError("must be 0 (never) or more seconds", field="idle-timeout", rule="range")
    db = _target()
    _prepare_dir()
    sock = client.socket_path(db)
    running = client.request(sock, {"op": "status"})
    if running is None:
        running = _spawn(db, embedder_name().strip().lower(), idle_timeout)
    if running.get("busy"):  # running, answering someone else: it is the one reported
        running = {**running, "db": db, "socket": sock}
    emit(running, wants_json(), lambda: _human(running))


def _spawn(db: str, embedder: str, idle: float) -> dict[str, Any]:
    import subprocess

    code = "from atomic_agents.cli._daemon import _child_main; _child_main()"
    src = str(Path(__file__).resolve().parents[2])  # the package this CLI runs from, whatever the cwd
    env = dict(os.environ)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    def launch() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", code, db, embedder, repr(idle)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
                                env=env)

    sock, lock = client.socket_path(db), client.lock_path(db)
    deadline = time.monotonic() + START_TIMEOUT
    ours: subprocess.Popen[bytes] | None = launch()  # None: it found the lock held, and exited
    while time.monotonic() < deadline:
        rc = ours.poll() if ours is not None else None
        status = client.request(sock, {"op": "status"})
        if status is not None:
            if ours is not None and ours.stderr is not None:
                ours.stderr.close()
            return status
        if ours is not None and rc is not None:
            assert ours.stderr is not None
            message = ours.stderr.read().decode("utf-8", "backslashreplace").strip()
            ours.stderr.close()
            if rc != _ALREADY:
                raise StoreError(f"the daemon did not start: {message or f'exit code {rc}'}")
            ours = None
        if ours is None:
            # The lock was held: by another start that won the race (report that one once it answers),
            # or only for a moment (a stale check, a daemon on its way out): once it is free, start again.
            time.sleep(0.2)
            if _unlocked(lock):
                ours = launch()
            continue
        time.sleep(0.05)
    if ours is not None:
        ours.kill()
    raise StoreError(f"the daemon did not answer within {START_TIMEOUT:.0f} s")


@app.command()
@shared("agents_root", "db", "json")
def stop() -> None:
    """Stop the daemon of the memory store (waits until it has served it and exited); no daemon is not an error."""
    from ._common import wants_json

    db = _target(checked=False)
    # A busy daemon takes the stop once its request is done (one at a time): wait for that, not only 2 s
    # (its running command is not cut short: a SIGTERM now could leave a write half reported).
    reply = client.request(client.socket_path(db), {"op": "stop"}, reply_timeout=STOP_TIMEOUT)
    if reply is not None and reply.get("busy"):
        raise StoreError(f"the daemon for {db} (pid {reply.get('pid')}) is still busy after {STOP_TIMEOUT:.0f} s: "
                         "not stopped")
    data = {"running": False, "db": db, "socket": client.socket_path(db), "stopped": reply is not None}
    if reply is not None:
        _wait_unlocked(client.lock_path(db))
        _wait_gone(int(reply.get("pid") or 0))
        data.update(pid=reply.get("pid"), requests=reply.get("requests"))
    line = f"daemon for {db} stopped\n" if reply is not None else f"no daemon running for {db}\n"
    emit(data, wants_json(), lambda: None if sys.stdout.write(line) is None else None)


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    """Until process ``pid`` has exited (a zombie counts as exited)."""
    deadline = time.monotonic() + timeout
    while pid > 0 and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    return
        except (ProcessLookupError, PermissionError):
            return
        except OSError:  # no /proc (macOS): the signal probe alone
            pass
        time.sleep(0.02)


def _wait_unlocked(lock: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _unlocked(lock):
        time.sleep(0.05)


def _unlocked(lock: str) -> bool:
    """Whether no process holds the daemon's lock now (no lock file: none does)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@app.command()
@shared("agents_root", "db", "json")
def status() -> None:
    """Report the daemon of the memory store: pid, db, socket, uptime, requests served, or busy (exit 1: none runs)."""
    from ._common import wants_json

    db = _target(checked=False)
    data = client.request(client.socket_path(db), {"op": "status"}) or {
        "running": False, "db": db, "socket": client.socket_path(db)}
    if data.get("busy"):  # it took the connection but is answering another request: running
        data = {**data, "db": db, "socket": client.socket_path(db)}
    emit(data, wants_json(), lambda: _human(data))
    if not data.get("running"):
        raise typer.Exit(1)


def register(root: typer.Typer) -> None:
    """Attach the ``daemon`` group to the root app."""
    root.add_typer(app, name="daemon")

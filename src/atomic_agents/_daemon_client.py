"""The lean client of the daemon (``atomic-agents daemon``): standard library only, no typer.

:func:`atomic_agents.cli.main` calls :func:`try_daemon` before it imports typer. For a
``memory <command>``, ``context AGENT`` or ``vault search AGENT QUERY`` line it resolves
the database the command targets exactly as the full CLI does (``--db`` of the command,
then of the group, then ``$ATOMIC_AGENTS_DB``, else ``<agents-root>/_memory/memory.db``
with the same precedence for the root), finds
that database's daemon socket and, if one answers, has the daemon run the command and
writes back its stdout and stderr bytes and exit code. The daemon runs the same typer
command code, so the answer is the in-process one by construction.

``ATOMIC_AGENTS_DAEMON=off`` always runs in-process. Anything short of a clean answer (no socket, a stale one, a socket or folder not owned
by this user, another version of the code, a terminal on stdin/stdout/stderr, an
argument the lean parser does not follow) returns ``None``: the caller then runs the
command in-process, as without a daemon. Once a command has been sent, a daemon that
dies before answering is reported (a write may or may not have happened), except for
read-only commands, which simply run again in-process.

Stdin is sent only when the command reads it (:func:`reads_stdin`: the ``-`` of a text
option, its first argument or ``--jsonl``), and read to its end before connecting: a
slow writer keeps neither the daemon (one request at a time) nor its time limit
waiting. A line naming a file of the client process itself (``/dev/stdin``,
``/dev/fd/N``) runs in-process, where that file is the one meant.

Wire format (same user, same Python: ``marshal``): frames of an 8-byte big-endian
length and a payload. Client: a hello (a dict), then the stdin bytes; daemon: an
acknowledgement (a dict), then ``{"code": n}``, the stdout bytes and the stderr bytes.
The daemon runs the command only once the stdin frame is whole: a client that cannot
send it knows nothing ran (and runs it in-process).
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import time
TYPE_CHECKING = False  # typing stays unimported (the warm path)
if TYPE_CHECKING:
    from typing import Any

import _socket

from . import __version__

__all__ = ["OTHER", "ROUTED", "daemon_key", "lock_path", "names_own_file", "reads_stdin", "resolve_db", "runtime_dir",
           "socket_path", "try_daemon"]

PROTOCOL = 1
#: The memory commands the daemon runs (export/import/reindex stream files or draw progress bars: in-process).
ROUTED = frozenset({
    "remember", "recall", "search", "search-semantic", "search-hybrid", "list", "get", "edit",
    "forget", "forget-expired", "prune", "health", "vacuum",
})  # fmt: skip
#: Commands outside the memory group the daemon runs, with their options that take no value
#: (a ``context`` without ``--query``/``--goal`` needs no store, but the daemon has the vault's
#: watch and the tokenizer warm: answered there too when it runs).
OTHER = {"context": frozenset(), "vault search": frozenset({"--json", "--include-superseded", "--sync"})}
#: Commands run again in-process when the daemon dies before answering: they change nothing
#: (``vault search --sync`` syncs the mirror first: a sync made twice is the one sync, under the agent's lock).
READ_ONLY = frozenset({"recall", "search", "search-semantic", "search-hybrid", "list", "get", "health", *OTHER})
#: Options of the routed memory commands that take no value (every other ``--x`` takes one;
#: tests/cli/test_daemon_flags.py checks this against the full CLI).
_FLAGS = frozenset({"--json", "--no-expiry", "--expired-only", "--confirm", "--hard", "--rerank"})
#: The location options each group takes before its command (``context`` is no group).
_GROUP_OPTS = {"memory": ("--agents-root", "--db"), "vault": ("--agents-root",)}
#: Environment read once at import time by typer/rich: the daemon serves a client only if these match its own.
#: Ours read once per process too: the context's token counter (``ATOMIC_AGENTS_TOKENIZER``) and the
#: store's ANN tier (``ATOMIC_AGENTS_ANN_THRESHOLD``, read when the daemon opened its store).
PINNED_ENV = ("TERMINAL_WIDTH", "_TYPER_FORCE_DISABLE_TERMINAL", "GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS",
              "TYPER_USE_RICH", "TYPER_STANDARD_TRACEBACK", "_TYPER_STANDARD_TRACEBACK", "PYTHONHASHSEED",
              "ATOMIC_AGENTS_TOKENIZER", "ATOMIC_AGENTS_ANN_THRESHOLD")  # fmt: skip
CONNECT_TIMEOUT = 2.0
REPLY_TIMEOUT = 300.0
_MAX_FRAME = 1 << 31
#: The largest request header (argv, environment, streams) a daemon reads; the stdin frame may be larger.
MAX_HELLO = 16 << 20


def daemon_key() -> str:
    """Client and daemon must run the same code: protocol, version, package folder (and its install time), Python."""
    here = os.path.abspath(__file__)
    try:
        stamp = os.stat(here).st_mtime_ns  # a reinstall of the same version rewrites this file
    except OSError:  # pragma: no cover
        stamp = 0
    return f"{PROTOCOL}|{__version__}|{os.path.dirname(here)}|{stamp}|{sys.version}"


def runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR/atomic-agents``, else ``/tmp/atomic-agents-<uid>`` (both mode 0700, this user's)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "atomic-agents")
    return f"/tmp/atomic-agents-{os.getuid()}"


def _digest(db: str) -> str:
    try:
        from _blake2 import blake2b  # builtin: cheaper than hashlib's OpenSSL import
    except ImportError:  # pragma: no cover
        from hashlib import blake2b
    return blake2b(os.fsencode(db), digest_size=12).hexdigest()


def socket_path(db: str) -> str:
    """The socket of the daemon serving database ``db`` (an absolute, resolved path)."""
    return os.path.join(runtime_dir(), _digest(db) + ".sock")


def lock_path(db: str) -> str:
    """Held (``flock``) by the daemon for its whole life: one daemon per database; a socket without it is stale."""
    return os.path.join(runtime_dir(), _digest(db) + ".lock")


def owned(path: str, *, folder: bool) -> bool:
    """``path`` is this user's (``lstat``: a symlink is refused), a socket, or a folder no one else can enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if st.st_uid != os.getuid():
        return False
    if folder:
        return stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o077
    return stat.S_ISSOCK(st.st_mode)


def _value(args: list[str], i: int) -> tuple[str | None, int]:
    """The value of the option at ``args[i]`` (``--x=v`` or ``--x v``) and the index after it."""
    name, eq, val = args[i].partition("=")
    if eq:
        return val, i + 1
    if i + 1 < len(args):
        return args[i + 1], i + 2
    return None, i + 1


def resolve_db(args: list[str], env: dict[str, str] | os._Environ[str], cwd: str) -> tuple[str, str] | None:
    """``(command, absolute database path)`` for a routed line, or ``None`` to run in-process (see :func:`_resolve`)."""
    got = _resolve(args, env, cwd)
    return None if got is None else got[:2]


def _resolve(args: list[str], env: dict[str, str] | os._Environ[str], cwd: str) -> tuple[str, str, int] | None:
    """``(command, absolute database path, index of the command's first own argument)``, or ``None`` to run in-process.

    Routed: ``memory <command>`` (``command`` is its name), ``context AGENT`` and ``vault
    search AGENT QUERY`` (``"context"``, ``"vault search"``). Precedence as in
    ``cli/_common.py`` and ``memory/_store.py``: the command's option, then its group's
    (``memory --db/--agents-root``, ``vault --agents-root``), then the root's
    (``--agents-root``); then the environment; then the default. Anything unexpected
    (another option before the command, a DSN, ``--help``) is ``None``.
    """
    root: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] not in ("memory", "context", "vault"):  # root options: only --agents-root
        if args[i].partition("=")[0] != "--agents-root":
            return None
        val, i = _value(args, i)
        if val is None:
            return None
        root["agents_root"] = val
    if i >= len(args):
        return None
    group_name = args[i]
    i += 1
    group: dict[str, str] = {}
    if group_name == "context":
        command, flags = "context", OTHER["context"]
    else:
        allowed = _GROUP_OPTS[group_name]
        while i < len(args) and args[i].startswith("-"):
            name = args[i].partition("=")[0]
            if name not in allowed:
                return None
            val, i = _value(args, i)
            if val is None:
                return None
            group[name[2:].replace("-", "_")] = val
        if i >= len(args):
            return None
        if group_name == "memory":
            if args[i] not in ROUTED:
                return None
            command, flags = args[i], _FLAGS
        else:
            if args[i] != "search":
                return None
            command, flags = "vault search", OTHER["vault search"]
        i += 1
    start = i
    own: dict[str, str] = {}
    while i < len(args):
        tok = args[i]
        if tok == "--":
            break
        if not tok.startswith("--"):
            i += 1
            continue
        name = tok.partition("=")[0]
        if name in ("--help", "--version"):
            return None
        if name in flags:
            i += 1
            continue
        val, i = _value(args, i)
        if name in ("--db", "--agents-root"):
            if val is None:
                return None
            own[name[2:].replace("-", "_")] = val
    values = {**root, **group, **own}
    db = values.get("db")
    if db is None:
        db = env.get("ATOMIC_AGENTS_DB") or None
    if db is None:
        given = values.get("agents_root")  # given empty is given (the CLI's Path(""): the working folder)
        base = given if given is not None else (env.get("ATOMIC_AGENTS_ROOT") or "agents")
        db = os.path.join(base, "_memory", "memory.db")
    if not db or "://" in db:
        return None
    return command, os.path.realpath(os.path.join(cwd, db)), start


#: The routed commands that read stdin, and what makes them read it (cli/_memory.py): the option naming the
#: text (``CONTENT`` / ``QUERY``; given, it wins over the first positional argument, as ``_text`` reads them)
#: or that first positional argument, when it is ``-``. ``context`` and ``vault search`` never read stdin.
_STDIN_TEXT = {
    "remember": ("--content", "--fact"),
    "recall": ("--query", "--topic"),
    "search": ("--keywords", "--query", "--topic"),
    "search-semantic": ("--query", "--topic"),
    "search-hybrid": ("--query", "--topic"),
}
#: The commands with ``--jsonl FILE|-``: given, it is all they read (with a text too, they refuse the line unread).
_JSONL = {"remember": ("--content", "--fact", "--metadata"), "recall": ("--query", "--topic")}


def reads_stdin(command: str, args: list[str]) -> bool:
    """Whether ``command`` with its own arguments ``args`` reads stdin, as click parses them.

    Only then is stdin read and sent: a ``-`` that is the value of another option
    (``--agent-id -``) must not make the client wait for the end of a stdin the
    command never reads. ``--x=-`` is ``--x -``. A line click refuses reads nothing.
    """
    text_opts = _STDIN_TEXT.get(command)
    if text_opts is None:
        return False
    exclusive = _JSONL.get(command, ())
    option = jsonl = positional = None
    given: set[str] = set()
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":  # the rest are arguments
            if positional is None and i + 1 < len(args):
                positional = args[i + 1]
            break
        if tok.startswith("-") and tok != "-":  # an option (click takes the next token as its value, whatever it is)
            name = tok.partition("=")[0]
            if name in _FLAGS:
                i += 1
                continue
            val, i = _value(args, i)
            given.add(name)
            if name in text_opts:
                option = val
            elif name == "--jsonl" and exclusive:
                jsonl = val
            continue
        if positional is None:
            positional = tok
        i += 1
    if jsonl is not None:
        return jsonl == "-" and positional is None and not given & set(exclusive)
    return (option if option is not None else positional) == "-"


#: Files that are the opening process's own (its stdin, its descriptors): opened in the daemon they would be
#: the daemon's (stdin /dev/null), so a line naming one (``--jsonl /dev/stdin``, ``--jsonl <(cmd)``) runs in-process.
_OWN_FILES = ("/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/", "/proc/thread-self/")


def names_own_file(args: list[str], cwd: str) -> bool:
    """Whether an argument (or the value of a ``--x=value``) is a path to one of this process's own files.

    By name and, through symlinks (``/dev/stdin`` -> ``/proc/self/fd/0``, a link to it), by where it leads.
    """
    mine = f"/proc/{os.getpid()}/"
    for tok in args:
        for val in (tok, tok.partition("=")[2]) if tok.startswith("--") else (tok,):
            if "/" not in val or len(val) > 4096:  # not a path, or longer than one can be
                continue
            path = os.path.normpath(os.path.join(cwd, val))
            if path.startswith(_OWN_FILES) or path + "/" in _OWN_FILES:
                return True
            try:
                real = os.path.realpath(path)
            except (OSError, ValueError):  # pragma: no cover
                continue
            if real.startswith(_OWN_FILES) or real.startswith(mine) or real + "/" == mine:
                return True
    return False


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def send(sock: Any, obj: Any) -> None:
    sock.sendall(_frame(obj if isinstance(obj, bytes) else marshal.dumps(obj)))


def _recv_exact(sock: Any, n: int, deadline: float | None = None) -> bytes:
    parts, got = [], 0
    while got < n:
        if deadline is not None:  # one limit for the whole frame, not per chunk (a trickle cannot stretch it)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the frame did not arrive in time")
            sock.settimeout(left)
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("the daemon closed the connection")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def recv_bytes(sock: Any, deadline: float | None = None, limit: int = _MAX_FRAME) -> bytes:
    """One frame's payload; ``deadline`` (``time.monotonic()``): all of it by then, else ``TimeoutError``.
    A frame announcing more than ``limit`` bytes is refused before any of it is read."""
    n = int.from_bytes(_recv_exact(sock, 8, deadline), "big")
    if n > limit:
        raise ConnectionError("frame too large")
    return _recv_exact(sock, n, deadline)


def recv(sock: Any, deadline: float | None = None, limit: int = _MAX_FRAME) -> Any:
    return marshal.loads(recv_bytes(sock, deadline, limit))


def connect(path: str, timeout: float = CONNECT_TIMEOUT) -> Any:
    """A connected socket to the daemon at ``path``, after the ownership checks; ``None`` if there is none.

    A socket that refuses the connection while no daemon holds its lock is stale: it is removed.
    """
    if not hasattr(_socket, "AF_UNIX") or not owned(os.path.dirname(path), folder=True) or not owned(path, folder=False):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except ConnectionRefusedError:
        sock.close()
        remove_if_stale(path)
        return None
    except OSError:
        sock.close()
        return None
    return sock


def remove_if_stale(path: str) -> bool:
    """Remove the socket ``path`` if no daemon holds its database's lock (a crashed daemon left it)."""
    import fcntl

    lock = path[: -len(".sock")] + ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        fd = -1
    except OSError:
        return False
    try:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # a daemon holds it (starting up): not stale
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return True
    finally:
        if fd >= 0:
            os.close(fd)


def request(path: str, hello: dict[str, Any], timeout: float = CONNECT_TIMEOUT,
            reply_timeout: float | None = None) -> dict[str, Any] | None:
    """One control request (``status``, ``stop``) to the daemon at ``path``; ``None`` if no daemon is there.

    A daemon that takes the connection but does not answer within ``reply_timeout``
    (default ``timeout``) is running, busy with another request (it serves one at a
    time): ``{"running": True, "busy": True, "pid": ...}`` (its pid from the socket's
    peer credentials, ``None`` where the OS does not tell), not "no daemon".
    """
    sock = connect(path, timeout)
    if sock is None:
        return None
    try:
        send(sock, hello)
        sock.settimeout(timeout if reply_timeout is None else reply_timeout)
        reply = recv(sock)
        return reply if isinstance(reply, dict) else None
    except TimeoutError:
        return {"running": True, "busy": True, "pid": _peer_pid(sock)}
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        sock.close()


def _peer_pid(sock: Any) -> int | None:
    """The pid of the process listening at the other end (Linux ``SO_PEERCRED``), else ``None``."""
    opt = getattr(_socket, "SO_PEERCRED", None)
    if opt is None:  # pragma: no cover - not Linux
        return None
    try:
        pid = int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, opt, 12)[:4], sys.byteorder, signed=True)
    except OSError:  # pragma: no cover
        return None
    return pid if pid > 0 else None


def _stream_info(stream: Any) -> tuple[str, str]:
    return (getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict")


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def try_daemon(args: list[str]) -> int | None:
    """Run ``atomic-agents <args>`` through the database's daemon; its exit code, or ``None`` to run in-process."""
    if os.name != "posix" or "_ATOMIC_AGENTS_COMPLETE" in os.environ or os.environ.get("ATOMIC_AGENTS_DAEMON") == "off":
        return None
    if any(os.isatty(fd) for fd in (0, 1, 2)):  # terminal width, colours, indented JSON: in-process
        return None
    if sys.stdout is None or sys.stderr is None:  # a closed stream (``2>&-``): in-process meets it as it always has
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    routed = _resolve(args, os.environ, cwd)
    if routed is None:
        return None
    command, db, start = routed
    if names_own_file(args, cwd):  # /dev/stdin, /dev/fd/N...: the daemon would open its own
        return None
    reads = reads_stdin(command, args[start:])
    if reads and sys.stdin is None:
        return None
    path = socket_path(db)
    if not owned(path, folder=False):  # no daemon (the common case): stdin is left to the command
        return None
    data = b""
    if reads:  # all of it before connecting: however slowly it comes, the daemon is not kept waiting (or timed out)
        try:
            data = sys.stdin.buffer.read()
        except (OSError, ValueError, AttributeError):
            return None  # in-process meets the same stdin, and reports it as it always has
    sock = connect(path)
    if sock is None:
        return _in_process(data if reads else None)
    try:
        return _exchange(sock, args, cwd, command, data if reads else None)
    finally:
        sock.close()


def _in_process(stdin: bytes | None) -> int | None:
    """Give up on the daemon (``None``): the command runs in-process, on the stdin read here (``None``: none was)."""
    if stdin is not None:
        import io

        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding=sys.stdin.encoding, errors=sys.stdin.errors,
                                     newline="\n")
    return None


def _exchange(sock: Any, args: list[str], cwd: str, command: str, stdin: bytes | None) -> int | None:
    hello = {
        "op": "run",
        "key": daemon_key(),
        "pinned": {k: os.environ.get(k) for k in PINNED_ENV},
        "argv": list(args),
        "argv0": sys.argv[0] if sys.argv else "atomic-agents",
        "cwd": cwd,
        "env": dict(os.environ),
        "umask": _umask(),
        "streams": [_stream_info(sys.stdin), _stream_info(sys.stdout), _stream_info(sys.stderr)],
    }
    try:
        send(sock, hello)
        ack = recv(sock)
    except (OSError, ValueError, EOFError, TypeError):
        return _in_process(stdin)
    if not isinstance(ack, dict) or not ack.get("ok"):
        return _in_process(stdin)  # another version, another environment: in-process
    try:
        sock.settimeout(REPLY_TIMEOUT)
        # The daemon runs the command only once this frame is whole: if it cannot be sent, nothing ran.
        send(sock, stdin or b"")
    except (OSError, ValueError):
        return _in_process(stdin)
    try:
        reply = recv(sock)
        out, err = recv_bytes(sock), recv_bytes(sock)
        code = int(reply["code"])
    except (OSError, ValueError, EOFError, TypeError, KeyError):
        if command in READ_ONLY:  # nothing was changed: run it here (stdin as it was read)
            return _in_process(stdin)
        sys.stderr.write("error: the memory daemon stopped before answering; the command may or may not have "
                         "taken effect (check, then run it again)\n")
        return 1
    sys.stdout.flush()
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    sys.stderr.flush()
    sys.stderr.buffer.write(err)
    sys.stderr.buffer.flush()
    return code

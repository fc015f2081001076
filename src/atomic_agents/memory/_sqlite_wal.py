"""Closing the SQLite store without checkpointing its WAL (``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE``).

When the last connection to a WAL database closes, SQLite checkpoints the WAL into the
file, syncs it, and deletes the ``-wal`` and ``-shm`` files. That is 12-16 ms at the
exit of every CLI process that opened the store, and the next process creates both
files again.

Committed data is as safe in the WAL: with ``synchronous=FULL`` each commit syncs it.
The next process reads it back (WAL recovery: about 0.6 ms per MB, measured).

The WAL left behind is kept small, so no process pays a long recovery. A process that
finds a WAL recovers it, and recovery forgets how much of it was already checkpointed,
so SQLite never restarts (rewinds) that WAL for one-write processes: it would only grow.
Hence:

- :func:`close` turns the checkpoint back on when the WAL is larger than
  :data:`WAL_KEEP_BYTES` (1 MiB). That happens about once in 20 ``memory remember``
  processes (45-60 KB of WAL each, measured on 10,000 memories), or after one big
  transaction such as a large ``remember --jsonl``. The limit is below SQLite's autocheckpoint (1000 pages, about
  4 MB). So a CLI process never meets a WAL that every commit checkpoints in full again
  (autocheckpoint fires at each commit once the WAL has 1000 frames, and recovery
  has forgotten they are copied).
- In a long-lived process (the daemon, the MCP server) the autocheckpoint folds the WAL
  into the file while writing, as before. ``journal_size_limit`` (set in
  :func:`~._sqlite_schema.connect`) truncates the WAL back to :data:`WAL_KEEP_BYTES` at
  the first commit after a checkpoint restarted it.

Python 3.12+ sets the switch with ``Connection.setconfig``. Python 3.11 has no binding
for it. So on CPython 3.11 the connection's ``sqlite3*`` handle is read from the
Connection object: it is the first field after ``PyObject_HEAD`` of
``pysqlite_Connection`` (``Modules/_sqlite/connection.h``). ``sqlite3_db_config`` is
then called through ctypes, in the library the ``_sqlite3`` module itself is linked to.

The handle is trusted only when all of these hold, and the setting is read back after it
is set:

- ``sqlite3_db_filename(handle, "main")`` is the file this connection opened;
- ``sqlite3_total_changes(handle)`` equals ``Connection.total_changes``;
- the library's version is the one ``sqlite3`` reports.

On any doubt nothing is set, and closing checkpoints as before. That covers another
implementation or version, a ``_sqlite3`` built in or linked statically without exported
symbols, a second SQLite copy in the process, and no ctypes. The binding uses ctypes'
C core (``_ctypes``, 0.8 ms to import against 2-8 ms for ``ctypes``) and loads only when
a store is opened.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

__all__ = ["WAL_KEEP_BYTES", "close", "keep_wal_on_close"]

#: SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (sqlite3.h; SQLite >= 3.16.2)
NO_CKPT_ON_CLOSE = 1006
#: A WAL up to this size is left for the next process; a larger one is checkpointed at close.
#: Every process that opens the store recovers the WAL it finds (0.6 ms per MB, measured), a
#: read-only one too, so this stays small. It is below SQLite's autocheckpoint (1000 pages
#: of 4 KiB).
WAL_KEEP_BYTES = 1024 * 1024

_lib: Any = None  # the bound functions once loaded; False: unavailable in this process


def keep_wal_on_close(conn: sqlite3.Connection, path: Path, keep: bool = True) -> bool:
    """Set whether closing ``conn`` (a connection to ``path``) skips the checkpoint.

    Returns ``True`` when the setting is known to be ``keep`` now. ``False`` means nothing
    was changed: closing then checkpoints, unless an earlier call had set the switch.
    """
    no_ckpt = getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", None)
    if no_ckpt is not None and hasattr(conn, "setconfig"):  # Python 3.12+
        try:
            conn.setconfig(no_ckpt, keep)
            return bool(conn.getconfig(no_ckpt)) is keep  # type: ignore[attr-defined,unused-ignore]
        except (sqlite3.Error, AttributeError, TypeError):  # pragma: no cover - a SQLite without the option
            return False
    try:
        lib = _library()
        handle = None if lib is None else verified_handle(conn, path)
        if handle is None:
            return False
        return _db_config(lib, handle, int(keep)) == int(keep) and _db_config(lib, handle, -1) == int(keep)
    except Exception:  # noqa: BLE001 - e.g. ctypes.ArgumentError: in doubt, closing checkpoints as before
        return False


def close(conn: sqlite3.Connection, path: Path) -> None:
    """Close ``conn``, checkpointing the WAL only when it has grown past :data:`WAL_KEEP_BYTES`.

    The checkpoint at close runs only when no other connection (another process) has the
    file open, so this never waits.
    """
    try:
        big = os.stat(f"{path}-wal").st_size > WAL_KEEP_BYTES
    except OSError:
        big = False
    if big:
        keep_wal_on_close(conn, path, False)
    conn.close()


def verified_handle(conn: sqlite3.Connection, path: Path) -> int | None:
    """``conn``'s ``sqlite3*`` on CPython 3.11, or ``None`` unless every check passes."""
    lib = _library()
    if lib is None or type(conn) is not sqlite3.Connection:
        return None
    try:
        changes = conn.total_changes  # raises on a closed connection (whose handle is NULL)
    except sqlite3.Error:
        return None
    # The first field after PyObject_HEAD (whose size object.__basicsize__ is, debug builds too).
    handle = lib.pointer.from_address(id(conn) + object.__basicsize__).value
    return handle if handle is not None and trusted(lib, handle, path, changes) else None


def trusted(lib: Any, handle: int, path: Path, changes: int) -> bool:
    """Whether ``handle`` is an open connection to ``path`` with ``changes`` total changes."""
    if handle % 8:  # sqlite3_open allocates it with malloc
        return False
    try:
        name = lib.db_filename(handle, b"main")
        if not name or lib.total_changes(handle) != changes:
            return False
        return os.path.samefile(os.fsdecode(name), path)
    except (OSError, ValueError):
        return False


def _db_config(lib: Any, handle: int, value: int) -> int | None:
    """``sqlite3_db_config(handle, NO_CKPT_ON_CLOSE, value, &out)``: ``out`` on success (-1 reads only)."""
    out = lib.int(-1)
    # A variadic function: argtypes name the two fixed arguments only. Called with more,
    # ctypes prepares the call with ffi_prep_cif_var, so the extra arguments (typed here)
    # are passed as variadic ones on every ABI, aarch64 on macOS included.
    rc = lib.db_config(handle, NO_CKPT_ON_CLOSE, lib.int(value), lib.byref(out))
    return int(out.value) if rc == 0 else None


def _library() -> Any:
    """The SQLite functions the ``_sqlite3`` module calls, bound once; ``None`` where unsure or not needed."""
    global _lib
    if _lib is None:
        _lib = _load() or False
    return _lib or None


def _load() -> Any:
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11) or os.name != "posix":
        return None  # 3.12+ has setconfig; elsewhere the Connection layout is not known
    try:
        # ctypes' own core. ``import ctypes`` costs 2-8 ms here: at import it makes a callback
        # thunk, which has libffi map executable memory through a temporary file. This needs
        # four functions and three C types.
        import _ctypes
        import _sqlite3

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Pointer(_ctypes._SimpleCData):
            _type_ = "P"

        class Text(_ctypes._SimpleCData):
            _type_ = "z"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = Int

        # dlopen of the loaded module returns its handle; dlsym there searches the module and the
        # libraries it links. The global scope (main program, RTLD_GLOBAL libraries) is searched first
        # when the module's own calls are bound, so a definition there must be the same one.
        module = _ctypes.dlopen(_sqlite3.__file__, _ctypes.RTLD_LOCAL)
        everywhere = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]  # dlopen(NULL)
        signatures = {"sqlite3_db_config": (Int, (Pointer, Int)), "sqlite3_db_filename": (Text, (Pointer, Text)),
                      "sqlite3_total_changes": (Int, (Pointer,)), "sqlite3_libversion_number": (Int, ())}
        functions = {}
        for name, (restype, argtypes) in signatures.items():
            address = _ctypes.dlsym(module, name)
            try:
                if _ctypes.dlsym(everywhere, name) != address:
                    return None  # two SQLite copies in this process: unsure which one _sqlite3 calls
            except OSError:
                pass  # not in the global scope: the module's own library is the one
            fn = Function(address)
            fn.restype, fn.argtypes = restype, argtypes
            functions[name] = fn
        major, minor, patch = sqlite3.sqlite_version_info
        if functions["sqlite3_libversion_number"]() != major * 1_000_000 + minor * 1_000 + patch:
            return None
        if (major, minor, patch) < (3, 16, 2):
            return None  # no NO_CKPT_ON_CLOSE yet
    except (ImportError, OSError, AttributeError, TypeError, ValueError):
        return None
    return _Binding(functions, Int, Pointer, _ctypes.byref)


class _Binding:
    def __init__(self, functions: dict[str, Any], int_type: Any, pointer_type: Any, byref: Any) -> None:
        self.db_config = functions["sqlite3_db_config"]
        self.db_filename = functions["sqlite3_db_filename"]
        self.total_changes = functions["sqlite3_total_changes"]
        self.int, self.pointer, self.byref = int_type, pointer_type, byref

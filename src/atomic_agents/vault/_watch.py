"""Which names of a folder changed since the last look: Linux inotify, read in-process.

The pinned index (:mod:`._pinned`) must know, at every context assembly, whether any
note of a 10,000-note folder was written since the previous one; a ``stat`` per
file costs 20-40 ms there. A long-lived process (the MCP server, the daemon, an
agent runtime calling ``Agent.context`` in a loop) can ask the kernel instead, as
git's fsmonitor and watchman do: an inotify watch on the folder queues one event
per create, write, attribute change, rename or delete of any entry in it, and
:func:`changed` hands over the names seen since the asker's previous call for that folder.

It only ever answers "these names" when that answer is complete, else ``None``
(the caller then looks at every file, as without a watch):

* the first call for a folder (the watch is set up *before* the caller's full look,
  so a write during that look shows at the next call);
* a folder whose inode changed (replaced, renamed, a symlink repointed), or whose
  watch ended (deleted, unmounted);
* a kernel queue overflow (``IN_Q_OVERFLOW``: every folder is unknown again);
* a file system other than a local one (on NFS, SMB, FUSE, 9p or virtiofs a write
  made by another machine or the host raises no event here);
* any platform without inotify, and any error.

What no watch on the folder can see, the caller looks at every time: a symlinked
entry (its target is written elsewhere) and a file with more than one hard link (it
can be written by its other name). Two changes this cannot see until the next full look
(as with git's fsmonitor and watchman): a hard link made elsewhere *after* a look, then
written through, and a write through a shared memory map (inotify(7): ``mmap`` writes
raise no event); ``ATOMIC_AGENTS_WATCH=off`` stats every file every time.

Events are queued by the kernel inside the writing system call, so a write that
returned before :func:`changed` is called is in the answer; nothing runs in the
background. After ``fork`` the child gets its own (empty) state: the inherited
descriptor shares the parent's queue, and reading it would steal the parent's events.

The binding is three libc calls through :mod:`ctypes` on the already-loaded libc
(``CDLL(None)``): ``inotify_simple`` would do the same, but resolves libc with
``ctypes.util.find_library``, which runs ``ldconfig`` (about 60 ms) in every process.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import threading
from typing import Any

__all__ = ["changed"]

# <sys/inotify.h>
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR = 0x01000000
_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
         | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_EVENT = struct.Struct("iIII")
# Names kept per asker between two of its calls; past that, telling them saves nothing over a full look,
# and an asker that stopped asking (in a long-lived process) would keep every name written since.
MAX_PENDING = 8192
# At most this many folders watched per process (and cached by the callers): the least recently asked goes first.
MAX_FOLDERS = 64

# File systems whose every write, from any process of any mount of this kernel, raises an event here.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs",
                      "jfs", "reiserfs", "bcachefs", "hfsplus", "nilfs2"})


class _Folder:
    """One watched folder: per asker (``who``), the names seen since that asker's last call."""

    __slots__ = ("ident", "pending", "valid", "wd")

    def __init__(self, wd: int, ident: tuple[int, int]) -> None:
        self.wd, self.ident, self.pending, self.valid = wd, ident, dict[str, set[str]](), True


class _Watcher:
    """One inotify descriptor per process, one watch per folder path."""

    def __init__(self) -> None:
        import ctypes  # only a process that assembles contexts needs it

        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.fd = fd
        self.folders: dict[str, _Folder] = {}
        self.by_wd: dict[int, _Folder] = {}

    def drain(self) -> None:
        """Read every queued event into the folders' pending names."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, pos)
                pos += _EVENT.size
                name = data[pos:pos + size].split(b"\0", 1)[0]
                pos += size
                self.dispatch(wd, mask, os.fsdecode(name))

    def dispatch(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:  # events were lost: nothing is known any more
            for each in self.folders.values():
                each.valid = False
            return
        f = self.by_wd.get(wd)
        if f is None:
            return
        if mask & _GONE:
            f.valid = False
        elif name:
            for who, names in list(f.pending.items()):
                names.add(name)
                if len(names) > MAX_PENDING:  # an asker gone quiet (or a flood): it looks at everything next time
                    del f.pending[who]

    def changed(self, folder: str, who: str) -> set[str] | None:
        st = os.stat(folder)  # the folder the caller will list (a symlinked folder: its target, as the listing)
        ident = (st.st_dev, st.st_ino)
        self.drain()
        f = self.folders.get(folder)
        if f is not None and f.valid and f.ident == ident:
            self.folders[folder] = self.folders.pop(folder)  # the most recently asked last (the eviction order)
            if who not in f.pending:
                f.pending[who] = set()
                return None  # a new asker: it looks at everything once, from now on it is told
            out, f.pending[who] = f.pending[who], set()
            return out
        if _fs_type(st.st_dev) not in LOCAL_FS:  # asked at each set-up: a device number is reused by the next mount
            return None
        if f is not None:
            self.folders.pop(folder, None)
        while len(self.folders) >= MAX_FOLDERS:  # the user's watches are shared with every other program
            self.forget(next(iter(self.folders)))
        wd = self._add(self.fd, os.fsencode(folder), _MASK)
        if wd < 0:
            return None  # e.g. the user's watch limit: the caller looks at everything, as without a watch
        if os.stat(folder).st_ino != st.st_ino:
            return None  # replaced between the stat and the watch: the next call starts over
        # the same inode watched twice shares one wd (its old events were drained above)
        new = _Folder(wd, ident)
        new.pending[who] = set()
        old = self.by_wd.get(wd)
        if old is not None:
            self.folders = {k: v for k, v in self.folders.items() if v is not old}
        self.folders[folder] = new
        self.by_wd[wd] = new
        return None  # the caller looks at every file now; what changes from here on shows next time


    def forget(self, folder: str) -> None:
        """Stop watching ``folder`` (the least recently asked one, when :data:`MAX_FOLDERS` are watched)."""
        f = self.folders.pop(folder)
        if self.by_wd.get(f.wd) is f:
            del self.by_wd[f.wd]
            self._rm(self.fd, f.wd)  # its IN_IGNORED finds no folder and is dropped


def _fs_type(dev: int) -> str | None:
    """The file system type of the mount with device ``dev`` (``/proc/self/mountinfo``), or ``None``."""
    want = f"{os.major(dev)}:{os.minor(dev)}"
    with contextlib.suppress(OSError, UnicodeDecodeError), open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 4 and fields[2] == want and "-" in fields:
                return fields[fields.index("-") + 1]
    return None


_lock = threading.Lock()
_watcher: _Watcher | None = None
_failed = False
_asked: set[tuple[str, str]] = set()  # (folder, who) asked before any watch was set up


def _reset_after_fork() -> None:
    global _watcher, _failed, _lock
    w, _watcher, _failed, _lock = _watcher, None, False, threading.Lock()
    _asked.clear()
    if w is not None:
        with contextlib.suppress(OSError):
            os.close(w.fd)  # the child's copy only; the parent's queue is untouched


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def enabled() -> bool:
    """``ATOMIC_AGENTS_WATCH``: off, 0, false or no turn the watch off; anything else (or unset) leaves it on."""
    return os.environ.get("ATOMIC_AGENTS_WATCH", "on").strip().lower() not in ("off", "0", "false", "no")


def changed(folder: str, who: str) -> set[str] | None:
    """Names in ``folder`` created, written, changed, renamed or removed since ``who``'s previous call.

    ``None`` means "not known": look at every file. The first call of each ``who`` for a
    folder always says so; the watch is set up at the second call of the process (a
    one-shot CLI call pays nothing for it), which says so too; from then on the folder
    is watched. Each ``who`` (one
    per cache built on the folder) is told every name, whoever else asks.
    """
    global _watcher, _failed
    if not sys.platform.startswith("linux") or not enabled():
        return None
    with _lock:
        try:
            if _watcher is None:
                if _failed or (folder, who) not in _asked:
                    _asked.add((folder, who))  # a one-shot process (a CLI call) asks once: no watch, no ctypes
                    return None
                _watcher = _Watcher()
            return _watcher.changed(folder, who)
        except (OSError, AttributeError, ValueError, ImportError):  # ImportError: a Python built without ctypes
            _failed = _watcher is None  # no inotify here: do not try again in this process
            if _watcher is not None:
                _watcher.folders.pop(folder, None)
            return None


def _state() -> Any:
    """The process's watcher (tests)."""
    return _watcher

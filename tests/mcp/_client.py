"""A synchronous handle on a real `atomic-agents serve` subprocess, spoken to with the official SDK's stdio client.

The client session lives on an asyncio loop in a background thread, so one
server can serve a whole test module (starting one costs about a second).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SRC = Path(__file__).resolve().parents[2] / "src"


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    env.update(extra)
    return env


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "atomic_agents.cli", "serve", *args]


class Result:
    """A tool answer: ``is_error`` and the JSON text parsed (``data``)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.is_error = bool(raw.is_error)
        self.text = "".join(getattr(c, "text", "") for c in raw.content)
        self.data: Any = json.loads(self.text)

    def __repr__(self) -> str:
        return f"Result(is_error={self.is_error}, {self.text[:300]})"


class McpClient:
    """``with McpClient(args, env, cwd, errlog) as c: c.call("eden_health")``."""

    def __init__(self, args: list[str], env: Mapping[str, str], cwd: Path, errlog: Path) -> None:
        self._params = StdioServerParameters(command=args[0], args=args[1:], env=dict(env), cwd=str(cwd))
        self._errlog_path = errlog
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future[Any] | None = None
        self.session: ClientSession | None = None
        self.init_result: Any = None

    def __enter__(self) -> McpClient:
        self._thread.start()
        self._errlog = open(self._errlog_path, "w", encoding="utf-8")  # noqa: SIM115
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self.init_result = started.result(timeout=60)
        return self

    async def _start(self) -> Any:
        self._stop = asyncio.Event()
        ready: asyncio.Future[Any] = self._loop.create_future()
        self._holder = self._loop.create_task(self._hold(ready))
        return await ready

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        try:
            async with stdio_client(self._params, errlog=self._errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    self.session = session
                    ready.set_result(await session.initialize())
                    assert self._stop is not None
                    await self._stop.wait()
        except BaseException as exc:  # surface start-up failures to __enter__
            if not ready.done():
                ready.set_exception(exc)
            else:
                raise

    def _run(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Result:
        assert self.session is not None
        return Result(self._run(self.session.call_tool(name, dict(arguments or {}))))

    def ok(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        r = self.call(name, arguments)
        assert not r.is_error, r
        return r.data

    def error(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        r = self.call(name, arguments)
        assert r.is_error, r
        return dict(r.data)

    def list_tools(self) -> list[Any]:
        assert self.session is not None
        return list(self._run(self.session.list_tools()).tools)

    def list_resources(self) -> list[Any]:
        assert self.session is not None
        return list(self._run(self.session.list_resources()).resources)

    def read_resource(self, uri: str) -> Any:
        assert self.session is not None
        return self._run(self.session.read_resource(uri))

    def stderr(self) -> str:
        self._errlog.flush()
        return self._errlog_path.read_text(encoding="utf-8", errors="replace")

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            try:
                asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(self._holder), 30), self._loop).result(40)
            except Exception:
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._errlog.close()

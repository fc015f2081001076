"""The server loads the model on a thread of its own at the client's first request, not at start.

The first tool call that embeds then finds the sessions built. The store uses that same
embedder; ``ATOMIC_AGENTS_MCP_WARM=0`` keeps the model lazy; a model that cannot load is
reported by the tool call, typed, and not by the thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atomic_agents.mcp._context import WARM_ENV, ServerConfig, Services
from atomic_agents.mcp._server import Dispatcher
from atomic_agents.memory import MiniLMEmbedder

S = {"agent_id": "builder", "user_id": "alice", "org_id": "acme", "workspace_id": "acme/web"}


def _config(tmp_path: Path, embedder: str | None) -> ServerConfig:
    return ServerConfig(db=tmp_path / "memory.db", agents_root=tmp_path / "agents", embedder=embedder)


def test_a_request_starts_the_warm_up_once_and_the_store_embeds_with_what_it_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WARM_ENV, raising=False)
    services = Services(_config(tmp_path, None))  # the default model
    dispatcher = Dispatcher(services)
    try:
        assert services._embedder is None  # nothing loads before the client asks for something
        asyncio.run(dispatcher.run(lambda: None))
        thread = services.warm_in_background()
        assert thread is not None and thread is services._warming  # one thread, whoever asks again
        thread.join(timeout=120)
        assert not thread.is_alive()
        emb = services.embedder()
        assert isinstance(emb, MiniLMEmbedder)
        assert emb._fast_session not in (None, False)  # the folded session is built and adopted
        assert services.store().embedder is emb
        is_error, text = dispatcher.call("eden_remember", {**S, "content": "the deploy key rotates every ninety days"})
        assert not is_error, text
        is_error, text = dispatcher.call("eden_recall", {**S, "query": "how often does the deploy key rotate", "limit": 1})
        assert not is_error and json.loads(text)["results"][0]["content"] == "the deploy key rotates every ninety days"
        assert emb._small_calls == 1  # the warm-up was the only counted call: the folded session served both
    finally:
        dispatcher.close()


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_warm_zero_keeps_the_model_lazy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(WARM_ENV, value)
    services = Services(_config(tmp_path, "hashing"))
    dispatcher = Dispatcher(services)
    try:
        asyncio.run(dispatcher.run(lambda: None))
        assert services.warm_in_background() is None and services._warming is None
        assert services._embedder is None  # not even the embedder object was made
    finally:
        dispatcher.close()


def test_a_model_that_cannot_load_is_the_tool_calls_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WARM_ENV, raising=False)
    services = Services(_config(tmp_path, "no-such-model-sk-live-abc123"))
    dispatcher = Dispatcher(services)
    try:
        thread = services.warm_in_background()
        assert thread is not None
        thread.join(timeout=30)
        assert not thread.is_alive()  # the thread ended quietly
        is_error, text = dispatcher.call("eden_recall", {**S, "query": "anything"})
        assert is_error
        err = json.loads(text)
        assert err["error"] == "ValidationError" and "unknown embedder" in err["message"]
        assert "sk-live" not in text  # the name may be a pasted secret: never echoed
    finally:
        dispatcher.close()


def test_closing_waits_for_the_warm_up_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The interpreter must not exit while the thread is inside onnxruntime (it aborted the process).
    monkeypatch.delenv(WARM_ENV, raising=False)
    monkeypatch.setattr(Services, "_warm", lambda self: time.sleep(0.5))
    services = Services(_config(tmp_path, "hashing"))
    dispatcher = Dispatcher(services)
    thread = services.warm_in_background()
    assert thread is not None and thread.is_alive()
    dispatcher.close()
    assert not thread.is_alive()


def test_a_client_that_lists_the_tools_and_leaves_gets_a_clean_exit(tmp_path: Path) -> None:
    """The real model: stdin closed while the warm-up builds its sessions (it crashed 6 runs in 10)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
    env.update(ATOMIC_AGENTS_DB=str(tmp_path / "m.db"), ATOMIC_AGENTS_ROOT=str(tmp_path / "agents"))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    for delay in (0.15, 0.35):
        p = subprocess.Popen([sys.executable, "-m", "atomic_agents.mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=tmp_path)  # fmt: skip
        assert p.stdin and p.stdout
        p.stdin.write((json.dumps(init) + "\n").encode())
        p.stdin.flush()
        assert p.stdout.readline()
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n").encode())
        p.stdin.flush()
        time.sleep(delay)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, (delay, p.returncode, err[-400:])

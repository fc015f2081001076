"""Loopback streamable HTTP behind a bearer token (401 without it; non-loopback refused), and the real default model."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ._client import McpClient, serve_command, server_env

TOKEN = "test-token-" + "q7" * 12
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("http")
    (base / "agents").mkdir()
    port = _free_port()
    env = server_env(ATOMIC_AGENTS_EMBEDDER="hashing", ATOMIC_AGENTS_TOKEN=TOKEN)
    proc = subprocess.Popen(serve_command("--http", f"127.0.0.1:{port}", "--agents-root", str(base / "agents")),
                            env=env, cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_requests_without_the_token_get_401(http_server: str) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx2.post(http_server, json=INIT, headers=headers).status_code == 401
    assert httpx2.post(http_server, json=INIT, headers={**headers, "Authorization": "Bearer wrong"}).status_code == 401
    assert httpx2.post(http_server, json=INIT, headers={**headers, "Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_sdk_client_works_with_the_token(http_server: str) -> None:
    async def run() -> tuple[list[str], str]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with streamable_http_client(http_server, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = [t.name for t in (await session.list_tools()).tools]
                    r = await session.call_tool("eden_remember", {"agent_id": "a", "user_id": "u", "content": "over http"})
                    return names, "".join(c.text for c in r.content)  # type: ignore[union-attr]

    names, text = asyncio.run(run())
    assert "eden_recall" in names and '"status": "remembered"' in text


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "192.168.1.10:8765", "example.com:8765"])
def test_non_loopback_addresses_are_refused_without_allow_remote(tmp_path: Path, address: str) -> None:
    done = subprocess.run(serve_command("--http", address, "--agents-root", str(tmp_path)), env=server_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "--allow-remote" in done.stderr and not done.stdout.strip()


def test_a_token_is_generated_and_printed_when_none_is_set(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(serve_command("--http", f"127.0.0.1:{port}", "--agents-root", str(tmp_path)),
                            env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "bearer token" in line
        token = line.rsplit(" ", 1)[1].strip()
        assert len(token) >= 32
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert token not in out  # stdout carries nothing


def test_the_real_default_model_recalls_by_meaning(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    args = serve_command("--agents-root", str(tmp_path / "agents"))
    with McpClient(args, server_env(), tmp_path, tmp_path / "stderr.log") as c:
        s = {"agent_id": "builder", "user_id": "alice"}
        keep = c.ok("eden_remember", {**s, "content": "The billing deploy failed because the webhook secret rotated."})["id"]
        c.ok("eden_remember", {**s, "content": "Lunch on Friday is pizza in the big meeting room."})
        hits = c.ok("eden_recall", {**s, "query": "why did the billing deploy fail?", "limit": 2})["results"]
        assert hits[0]["id"] == keep and hits[0]["score"] >= 0.45 and hits[0]["score"] > hits[1]["score"]
        assert "minilm" in c.ok("eden_health")["embedder"].lower()

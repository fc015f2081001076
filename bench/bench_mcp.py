"""MCP server latency: eden_recall / eden_remember round trips through the stdio server vs the same calls in-process.

Also: time from process start to the first answered ``initialize``, and the size of the tool
list in tokens (the shipped all-MiniLM-L6-v2 WordPiece tokenizer; chars/4 alongside).

    .venv/bin/python bench/bench_mcp.py [--calls 200] [--embedder hashing|minilm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))
S = {"agent_id": "builder", "user_id": "alice", "org_id": "acme", "workspace_id": "acme/web"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


def first_initialize(env: dict[str, str], root: Path, runs: int = 5) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "atomic_agents.cli", "serve", "--agents-root", str(root)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        assert p.stdin and p.stdout
        p.stdin.write((json.dumps(INIT) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()
        times.append(time.perf_counter() - t0)
        p.stdin.close()
        p.wait(timeout=30)
    return times


async def stdio_round_trips(env: dict[str, str], root: Path, calls: int) -> dict[str, list[float]]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "atomic_agents.cli", "serve", "--agents-root", str(root)], env=env)
    out: dict[str, list[float]] = {"eden_remember": [], "eden_recall": []}
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w), ClientSession(r, w) as session:  # noqa: SIM115
        await session.initialize()
        await session.call_tool("eden_remember", {**S, "content": "warm-up memory"})
        await session.call_tool("eden_recall", {**S, "query": "warm-up"})
        for i in range(calls):
            t0 = time.perf_counter()
            await session.call_tool("eden_remember", {**S, "content": f"stdio memory {i} about deploy retries"})
            out["eden_remember"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await session.call_tool("eden_recall", {**S, "query": f"deploy retries {i}", "limit": 5})
            out["eden_recall"].append(time.perf_counter() - t0)
    return out


def in_process(root: Path, calls: int) -> dict[str, list[float]]:
    """The same handlers the server runs (parse, one store call, render JSON), without the protocol."""
    from atomic_agents.mcp import ServerConfig, Services
    from atomic_agents.mcp._server import Dispatcher

    d = Dispatcher(Services(ServerConfig.from_env(agents_root=root, db=root / "_memory" / "inproc.db")))
    out: dict[str, list[float]] = {"eden_remember": [], "eden_recall": []}
    d.call("eden_remember", {**S, "content": "warm-up memory"})
    d.call("eden_recall", {**S, "query": "warm-up"})
    for i in range(calls):
        t0 = time.perf_counter()
        d.call("eden_remember", {**S, "content": f"in-process memory {i} about deploy retries"})
        out["eden_remember"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        d.call("eden_recall", {**S, "query": f"deploy retries {i}", "limit": 5})
        out["eden_recall"].append(time.perf_counter() - t0)
    d.services.close()
    return out


def tool_list_tokens() -> tuple[int, int, int]:
    from tokenizers import Tokenizer

    from atomic_agents.mcp import all_tools
    from atomic_agents.mcp._server import INSTRUCTIONS, tool_list

    text = json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tool_list(all_tools())]})
    tok = Tokenizer.from_file(str(SRC / "atomic_agents/memory/data/all-MiniLM-L6-v2/tokenizer.json"))
    tok.no_truncation()
    return len(text), len(tok.encode(text).ids), len(tok.encode(INSTRUCTIONS).ids)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--embedder", default="minilm")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "agents"
        root.mkdir()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))},
               "PYTHONPATH": str(SRC), "ATOMIC_AGENTS_EMBEDDER": a.embedder}
        os.environ["ATOMIC_AGENTS_EMBEDDER"] = a.embedder
        init = first_initialize(env, root)
        over = asyncio.run(stdio_round_trips(env, root, a.calls))
        local = in_process(root, a.calls)
    print(f"embedder {a.embedder}, {a.calls} calls each, load {os.getloadavg()[0]:.2f}")
    print("| call | in-process p50 / p95 | stdio server p50 / p95 | overhead p50 | target |")
    print("|---|---|---|---|---|")
    for name in ("eden_remember", "eden_recall"):
        extra = pct(over[name], 50) - pct(local[name], 50)
        print(f"| `{name}` | {pct(local[name], 50):.2f} / {pct(local[name], 95):.2f} ms | "
              f"{pct(over[name], 50):.2f} / {pct(over[name], 95):.2f} ms | +{extra:.2f} ms | <= +5 ms: {'met' if extra <= 5 else 'not met'} |")
    med = statistics.median(init) * 1000
    print(f"| first `initialize` from process start (median of {len(init)}) | | {med:.0f} ms (min {min(init)*1000:.0f}) | | "
          f"<= 500 ms: {'met' if med <= 500 else 'not met'} |")
    chars, tokens, instr = tool_list_tokens()
    from atomic_agents.mcp import all_tools

    print(f"tool list (tools/list JSON, {len(all_tools())} tools): "
          f"{chars} chars = {tokens} tokens (MiniLM WordPiece tokenizer), ~{chars // 4} by chars/4; instructions {instr} tokens")


if __name__ == "__main__":
    main()

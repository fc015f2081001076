"""MCP server latency: eden_recall / eden_remember round trips through the stdio server vs the same calls in-process.

Also: time from process start to the first answered ``initialize`` (``atomic-agents serve`` and
``python -m atomic_agents.mcp``) next to baselines started in the same run, interleaved: a bare
interpreter, ``python -c "import mcp"`` and the SDK's own low-level ``Server`` with no tools
(the floor any server built on the SDK pays); where the server's start-up time goes
(``-X importtime`` self time by package); and the size of the tool list in tokens (the shipped
all-MiniLM-L6-v2 WordPiece tokenizer; chars/4 alongside).

And the model's warm-up: the first recalls of a server that starts loading the model at the
client's first request, next to a lazy one (``ATOMIC_AGENTS_MCP_WARM=0``), started in turns.

    .venv/bin/python bench/bench_mcp.py [--calls 200] [--embedder hashing|minilm] [--warm-runs 5]
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
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))
S = {"agent_id": "builder", "user_id": "alice", "org_id": "acme", "workspace_id": "acme/web"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


SDK_FLOOR = """
import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
server = Server("floor")
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
"""
READ_LINE = "import sys; sys.stdin.readline(); print('{}', flush=True)"


def start_commands(root: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "bare interpreter (read a line, print)": [py, "-c", READ_LINE],
        '`python -c "import mcp"` (then read, print)': [py, "-c", "import mcp; " + READ_LINE],
        "SDK low-level `Server`, no tools (the floor)": [py, "-c", SDK_FLOOR],
        "`atomic-agents serve` (python -m atomic_agents.cli serve)": [py, "-m", "atomic_agents.cli", "serve", "--agents-root", str(root)],
        "`python -m atomic_agents.mcp`": [py, "-m", "atomic_agents.mcp", "--agents-root", str(root)],
    }


def first_initialize(env: dict[str, str], root: Path, runs: int = 9) -> dict[str, list[float]]:
    """Process start -> first line answered, per command; the commands take turns, so load hits them alike."""
    commands = start_commands(root)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            assert p.stdin and p.stdout
            p.stdin.write((json.dumps(INIT) + "\n").encode())
            p.stdin.flush()
            line = p.stdout.readline()
            times[name].append(time.perf_counter() - t0)
            assert line, f"{name}: no answer"
            p.stdin.close()
            p.wait(timeout=30)
    return times


def import_breakdown(env: dict[str, str], root: Path) -> list[tuple[str, float]]:
    """``-X importtime`` self time of the serve process up to its first answer, summed by package."""
    cmd = [sys.executable, "-X", "importtime", "-m", "atomic_agents.cli", "serve", "--agents-root", str(root)]
    out = subprocess.run(cmd, input=(json.dumps(INIT) + "\n").encode(), capture_output=True, env=env, timeout=60)
    by: dict[str, float] = {}
    for line in out.stderr.decode(errors="replace").splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].strip()
        top = ".".join(name.split(".")[:2]) if name.startswith(("mcp.", "atomic_agents.")) else name.split(".")[0]
        by[top] = by.get(top, 0.0) + int(parts[0]) / 1000
    return sorted(by.items(), key=lambda kv: -kv[1])


def _serve_params(env: dict[str, str], root: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "atomic_agents.cli", "serve", "--agents-root", str(root)], env=env)


async def stdio_round_trips(env: dict[str, str], root: Path, calls: int) -> dict[str, list[float]]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    params = _serve_params(env, root)
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


async def first_recalls(env: dict[str, str], root: Path, pause: float) -> list[float]:
    """One server: initialize, list the tools, wait ``pause`` s (the agent thinking), then six
    ``eden_recall`` calls; their round trips. The store already holds memories (made beforehand)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    params = _serve_params(env, root)
    out = []
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w), ClientSession(r, w) as session:  # noqa: SIM115
        await session.initialize()
        await session.list_tools()
        await asyncio.sleep(pause)
        for i in range(6):
            t0 = time.perf_counter()
            await session.call_tool("eden_recall", {**S, "query": f"which deploy retried {i} times", "limit": 5})
            out.append(time.perf_counter() - t0)
    return out


def warm_up_rows(env: dict[str, str], root: Path, runs: int, pause: float = 1.5) -> list[str]:
    """The model loading at the first request (``ATOMIC_AGENTS_MCP_WARM`` unset) against a lazy
    server (``=0``, the server before): first recall and the next five, servers taking turns."""
    from atomic_agents.mcp import ServerConfig, Services
    from atomic_agents.mcp._server import Dispatcher

    d = Dispatcher(Services(ServerConfig.from_env(agents_root=root)))  # the servers' own default store
    for i in range(50):
        d.call("eden_remember", {**S, "content": f"deploy {i} retried {i % 7} times before the health check passed"})
    d.close()
    kinds = {"warm at the first request (default)": {}, "lazy (ATOMIC_AGENTS_MCP_WARM=0; the server before)": {"ATOMIC_AGENTS_MCP_WARM": "0"}}
    got: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in kinds}
    for _ in range(runs):
        for name, extra in kinds.items():
            xs = asyncio.run(first_recalls({**env, **extra}, root, pause))
            got[name][0].append(xs[0])
            got[name][1].append(statistics.median(xs[1:]))
    rows = [f"| server | first `eden_recall` after {pause:g} s (median of {runs}) | recalls 2-6 (median) |", "|---|---|---|"]
    for name, (first, rest) in got.items():
        rows.append(f"| {name} | {statistics.median(first) * 1000:.1f} ms | {statistics.median(rest) * 1000:.1f} ms |")
    return rows


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
    ap.add_argument("--warm-runs", type=int, default=5, help="servers started per kind for the warm-up rows")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "agents"
        root.mkdir()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))},
               "PYTHONPATH": str(SRC), "ATOMIC_AGENTS_EMBEDDER": a.embedder}
        os.environ["ATOMIC_AGENTS_EMBEDDER"] = a.embedder
        init = first_initialize(env, root)
        breakdown = import_breakdown(env, root)
        over = asyncio.run(stdio_round_trips(env, root, a.calls))
        local = in_process(root, a.calls)
        warm_root = Path(tmp) / "warm-agents"
        warm_root.mkdir()
        warm = warm_up_rows(env, warm_root, a.warm_runs)
    print(f"embedder {a.embedder}, {a.calls} calls each, load {os.getloadavg()[0]:.2f}")
    print("| call | in-process p50 / p95 | stdio server p50 / p95 | overhead p50 | target |")
    print("|---|---|---|---|---|")
    for name in ("eden_remember", "eden_recall"):
        extra = pct(over[name], 50) - pct(local[name], 50)
        print(f"| `{name}` | {pct(local[name], 50):.2f} / {pct(local[name], 95):.2f} ms | "
              f"{pct(over[name], 50):.2f} / {pct(over[name], 95):.2f} ms | {extra:+.2f} ms | <= +5 ms: {'met' if extra <= 5 else 'not met'} |")
    print()
    print("| process start -> first answer (median / min of 9, interleaved) | ms | target |")
    print("|---|---|---|")
    for name, xs in init.items():
        ours = "atomic_agents" in name or "atomic-agents" in name
        verdict = ("<= 500 ms: " + ("met" if statistics.median(xs) * 1000 <= 500 else "not met")) if ours else "baseline"
        print(f"| {name} | {statistics.median(xs) * 1000:.0f} / {min(xs) * 1000:.0f} | {verdict} |")
    print()
    print("\n".join(warm))
    total = sum(v for _, v in breakdown)
    top = ", ".join(f"{k} {v:.0f} ms ({v / total:.0%})" for k, v in breakdown[:8])
    print(f"\nimport self time of `serve` up to its first answer (-X importtime, inflated by the tracing): {total:.0f} ms; {top}")
    chars, tokens, instr = tool_list_tokens()
    from atomic_agents.mcp import all_tools

    print(f"tool list (tools/list JSON, {len(all_tools())} tools): "
          f"{chars} chars = {tokens} tokens (MiniLM WordPiece tokenizer), ~{chars // 4} by chars/4; instructions {instr} tokens")


if __name__ == "__main__":
    main()

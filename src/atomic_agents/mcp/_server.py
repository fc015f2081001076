"""The MCP server: the official SDK's low-level ``Server`` with our tool table, over stdio.

Why the low-level server and not ``MCPServer`` (ex-FastMCP): the tool schemas
are hand-written (short, eden-memory's field names, legacy aliases accepted but
not listed, so the tool list costs fewer tokens), and argument errors are ours:
pydantic's messages quote the rejected value, which may be a secret.

Every call runs on one worker thread: the store (a SQLite connection) is opened
and used there only, the event loop keeps answering pings while a model embeds.
A user mistake (an :class:`~atomic_agents.AtomicAgentsError`) is a tool error
(``isError``) whose text is the JSON object the CLI prints for the same mistake;
the server keeps serving. Anything else is logged (type and stack, no message)
and answered as an internal error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sys
import traceback
from collections.abc import Iterable
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..exceptions import AtomicAgentsError
from ._atp import ATP_TOOLS
from ._context import ServerConfig, Services
from ._eden import EDEN_TOOLS
from ._tools import Args, ToolSpec, jsonable
from ._vault import VAULT_TOOLS, list_resources, read_resource

__all__ = ["ALL_TOOLS", "build_server", "serve_stdio"]

log = logging.getLogger("atomic_agents.mcp")

ALL_TOOLS: tuple[ToolSpec, ...] = (*EDEN_TOOLS, *ATP_TOOLS, *VAULT_TOOLS)  # = atomic_agents.mcp.all_tools()

INSTRUCTIONS = (
    "atomic-agents: eden-memory compatible memory (eden_*), the ATP goal ledger (atp_*) and Atomic Agent vaults "
    "(vault_*). Memory scope: agent_id and user_id required; org_id/workspace_id default to the server's "
    "EDEN_ORG_ID/EDEN_WORKSPACE_ID. Legacy names accepted: observer_id, observed_id, fact, topic, top_k. "
    "ATP identity: agent_id/org_id/workspace_id/user_id arguments, else EDEN_* environment. "
    "Answers are JSON text."
)


def _error_text(exc: BaseException) -> str:
    """The JSON error object the CLI prints (``cli/_common.py:_fail``); messages never carry a refused value."""
    from ..exceptions import ValidationError

    if isinstance(exc, AtomicAgentsError):
        payload: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, ValidationError):
            payload.update({k: v for k, v in exc.to_dict().items() if v is not None})
    elif isinstance(exc, OSError):
        name = exc.filename if isinstance(exc.filename, str) else None
        payload = {"error": "OSError", "message": f"{name}: {exc.strerror}" if name else (exc.strerror or "I/O error")}
    elif isinstance(exc, RecursionError):
        payload = {"error": "ValidationError", "message": "input nested too deeply", "rule": "depth"}
    else:
        payload = {"error": "InternalError", "message": f"internal error ({type(exc).__name__}); see the server log"}
    return json.dumps(jsonable(payload), ensure_ascii=False)


class Dispatcher:
    """Runs tool calls and resource reads on the one worker thread that owns the store."""

    def __init__(self, services: Services, tools: Iterable[ToolSpec] = ALL_TOOLS) -> None:
        self.services = services
        self.tools = {t.name: t for t in tools}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="atomic-agents-mcp")

    def call(self, name: str, arguments: Any) -> tuple[bool, str]:
        """``(is_error, text)`` for one call, on the calling thread (the worker, or a benchmark)."""
        spec = self.tools.get(name)
        if spec is None:
            return True, json.dumps({"error": "NotFoundError", "message": f"unknown tool {name[:100]!r}"})
        try:
            result = spec.handler(self.services, Args(arguments, aliases=spec.aliases))
            return False, json.dumps(jsonable(result), ensure_ascii=False)
        except (AtomicAgentsError, OSError, RecursionError) as exc:
            log.info("tool %s refused: %s", name, type(exc).__name__)
            return True, _error_text(exc)
        except Exception as exc:  # a bug, not a user mistake: stack to the log, never the message (it may hold input)
            log.error("tool %s failed with %s\n%s", name, type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
            return True, _error_text(exc)

    async def run(self, fn: Any, *args: Any) -> Any:
        self.services.warm_in_background()
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        try:
            self._pool.submit(self.services.close).result(timeout=10)
        finally:
            self._pool.shutdown(wait=False)
            self.services.wait_warm()


def tool_list(tools: Iterable[ToolSpec] = ALL_TOOLS) -> list[types.Tool]:
    return [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                   annotations=types.ToolAnnotations(read_only_hint=t.hints()["readOnlyHint"],
                                                     destructive_hint=t.hints()["destructiveHint"],
                                                     idempotent_hint=t.hints()["idempotentHint"],
                                                     open_world_hint=False))  # fmt: skip
        for t in tools
    ]


def build_server(dispatcher: Dispatcher) -> Server[Any]:
    """The low-level SDK server wired to ``dispatcher`` (tools and read-only vault resources)."""
    tools = tool_list(dispatcher.tools.values())

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        dispatcher.services.warm_in_background()  # a client lists the tools right after initialize
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        is_error, text = await dispatcher.run(dispatcher.call, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    async def on_list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        try:
            found = await dispatcher.run(list_resources, dispatcher.services)
        except (AtomicAgentsError, OSError) as exc:
            raise MCPError(types.INVALID_PARAMS, json.loads(_error_text(exc))["message"]) from None
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=name, description=desc, mime_type="text/markdown") for uri, name, desc in found
        ])  # fmt: skip

    async def on_list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template="vault://{agent}/INDEX.md", name="agent-index", mime_type="text/markdown"),
            types.ResourceTemplate(uri_template="vault://{agent}/persona/{file}", name="agent-persona",
                                   description="IDENTITY.md, SOUL.md or USER.md", mime_type="text/markdown"),
        ])  # fmt: skip

    async def on_read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text = await dispatcher.run(read_resource, dispatcher.services, uri)
        except (AtomicAgentsError, OSError) as exc:
            raise MCPError(-32002, json.loads(_error_text(exc))["message"]) from None  # -32002: resource not found (MCP)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/markdown")])

    return Server(
        "atomic-agents", version=__version__, instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools, on_call_tool=on_call_tool, on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_templates, on_read_resource=on_read_resource,
    )  # fmt: skip


def configure_logging(level: str = "WARNING") -> None:
    """Logs go to stderr only: on stdio, stdout carries nothing but the protocol."""
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def serve_stdio(config: ServerConfig) -> None:
    """Serve MCP on stdin/stdout until the client closes the stream."""
    import anyio
    from mcp.server.stdio import stdio_server

    dispatcher = Dispatcher(Services(config))
    server = build_server(dispatcher)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        dispatcher.close()

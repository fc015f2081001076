"""Streamable HTTP on a loopback address, behind a bearer token.

For agents on the same host that cannot spawn a process. The address must be
loopback (``127.0.0.0/8``, ``::1``, ``localhost``) unless ``allow_remote``; every
request must carry ``Authorization: Bearer <token>`` (the SDK's bearer
middleware answers 401 otherwise). The token is ``$ATOMIC_AGENTS_TOKEN``, or
one generated at start and printed on stderr.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import sys
from typing import Any

from ..exceptions import ValidationError
from ._context import ServerConfig

__all__ = ["TOKEN_ENV", "is_loopback", "parse_address", "serve_http"]

TOKEN_ENV = "ATOMIC_AGENTS_TOKEN"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> ``(host, port)``.

    >>> parse_address("127.0.0.1:8765")
    ('127.0.0.1', 8765)
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValidationError("give the address as HOST:PORT, e.g. 127.0.0.1:8765", field="http", rule="address")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it could resolve anywhere


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` for one shared token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._token):
            return AccessToken(token=token, client_id="local", scopes=[])
        return None


def serve_http(config: ServerConfig, address: str, *, allow_remote: bool = False, log_level: str = "warning") -> None:
    """Serve MCP over streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    host, port = parse_address(address)
    if not allow_remote and not is_loopback(host):
        raise ValidationError(f"{host} is not a loopback address; pass --allow-remote to listen on it",
                              field="http", rule="loopback")  # fmt: skip
    token = os.environ.get(TOKEN_ENV) or ""
    if not token:
        token = secrets.token_urlsafe(32)
        print(f"atomic-agents serve: bearer token (set {TOKEN_ENV} to choose one): {token}", file=sys.stderr, flush=True)

    import uvicorn
    from mcp.server.auth.settings import AuthSettings

    from ._context import Services
    from ._server import Dispatcher, build_server

    dispatcher = Dispatcher(Services(config))
    server = build_server(dispatcher)
    shown = f"[{host}]" if ":" in host else host
    app = server.streamable_http_app(
        host=host,
        auth=AuthSettings(issuer_url=f"http://{shown}:{port}", resource_server_url=None, validate_token_resource=False),  # type: ignore[arg-type]
        token_verifier=StaticTokenVerifier(token),
    )
    print(f"atomic-agents serve: MCP on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
    finally:
        dispatcher.close()

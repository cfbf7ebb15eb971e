"""The agent endpoint at /mcp (SPEC-0006): Streamable HTTP on the official MCP SDK.

Skeleton: the session manager mounted and run from the app's lifespan. The tools are built
in the MCP issue.
"""

from __future__ import annotations

import contextlib
from typing import AsyncIterator

from litestar import asgi
from litestar.types import Receive, Scope, Send
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from board.config import Settings


class McpSurface:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.manager: StreamableHTTPSessionManager | None = None

    def mount(self):
        surface = self

        @asgi("/mcp", is_mount=True, copy_scope=True)
        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            await surface.manager.handle_request(scope, receive, send)

        return mcp_endpoint

    @contextlib.asynccontextmanager
    async def running(self, store, fanout) -> AsyncIterator[None]:
        server = Server("switchboard")
        # run() works once per manager, so each app start builds a fresh one.
        self.manager = StreamableHTTPSessionManager(app=server)
        async with self.manager.run():
            yield

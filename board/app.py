"""The composition root: the Litestar app factory and its lifespan.

The lifespan starts (or connects to) Postgres, migrates, opens the pool, starts the one
LISTEN fan-out, the background sweeps and the due timer, and enters the MCP session manager's run()
and the A2A surface's handler
(a mounted ASGI app's own lifespan never runs). Nothing here is a module-level global.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from dataclasses import dataclass
from typing import AsyncIterator

from litestar import Litestar
from litestar.datastructures import State

from board.ops import health

from board.web import routes as web
from board.web.events import BoardRows
from board.web.templating import compile_templates
from board.ops import metrics as metrics_mod
from board.config import Settings
from board.store.db import EmbeddedPostgres, database_label, migrate, open_pool
from board.ops.hooks import HookDelivery, TransitionHooks
from board.live.fanout import Fanout
from board.live.presence import Presence
from board.mcp.server import McpSurface
from board.a2a.push import PUSH_EVENT, StorePushNotifications, push_body
from board.a2a.server import A2ASurface
from board.oauth.server import OAuthServer
from board.live.pause_cache import PauseCache
from board.store.store import Store
from board.ops.schedule import DueTimer
from board.ops.sweeps import Sweeps

log = logging.getLogger("switchboard.app")


@dataclass
class Runtime:
    """What the lifespan opened, reachable from handlers as app.state.runtime."""

    settings: Settings
    store: Store
    fanout: Fanout
    metrics: "metrics_mod.Metrics"
    database_url: str
    hooks: TransitionHooks


# uvloop's event loop and httptools' HTTP parser: both C, both well kept, and what uvicorn
# picks when installed; named here so every deployment (and the benchmarks) runs the same.
UVICORN_LOOP = "uvloop"
UVICORN_HTTP = "httptools"


class ServerScope:
    """The app as the HTTP server runs it: each request gets a copy of the server's scope.
    Litestar's router writes a mount's stripped path into the scope it is given (/mcp's app
    sees `/`, /oauth/token's sees `/token`); uvicorn's access log reads the server's scope
    when the response starts, so without the copy it logged `POST /` for `POST /mcp`."""

    def __init__(self, app: Litestar) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        await self.app(dict(scope), receive, send)


GC_YOUNG_THRESHOLD = 10_000


def proxy_options(settings: Settings) -> dict:
    """uvicorn's proxy header options: X-Forwarded-For and -Proto believed from the trusted
    proxies only (the client is the right-most forwarded address that is not one), from no
    peer when none are named."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": list(settings.trusted_proxies)}


def serve(settings: Settings, host: str, port: int) -> None:
    """Run the app under uvicorn until SIGINT or SIGTERM. On the signal, every open SSE and
    MCP listen stream is told to end first, so the graceful shutdown does not wait them out."""
    import uvicorn

    app = create_app(settings)
    compile_templates()  # before the first request that renders one (and frozen with the rest below)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            # What startup made (modules, the app, its pools) lives as long as the process:
            # frozen out of the collector's sight, and the youngest generation collected
            # every 10,000 allocations rather than 700, so far fewer objects reach the
            # oldest one. Under a thousand live streams its full collections had paused
            # the loop 100-170 ms each, a few times a second (docs/performance.md).
            gc.freeze()
            gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

        def handle_exit(self, sig, frame) -> None:
            runtime = getattr(app.state, "runtime", None)
            if runtime is not None:
                runtime.fanout.shutdown_threadsafe()
            super().handle_exit(sig, frame)

    # log_config=None: uvicorn adds no handlers of its own, so its records (the access log
    # included) reach the root handler and its escaping formatter (board/logs.py).
    # Proxy headers only from SWITCHBOARD_TRUSTED_PROXIES: uvicorn's own default
    # (FORWARDED_ALLOW_IPS, else 127.0.0.1 and ::1) would let any loopback peer name its address.
    config = uvicorn.Config(ServerScope(app), host=host, port=port, log_level="info", log_config=None,
                            timeout_graceful_shutdown=5, **proxy_options(settings), loop=UVICORN_LOOP,
                            http=UVICORN_HTTP)
    Server(config).run()


def listen_url_of(settings: Settings, url: str) -> str:
    """Where the process's LISTEN connection goes: SWITCHBOARD_LISTEN_DATABASE_URL when
    DATABASE_URL is set (a transaction pooler cannot hold a LISTEN, so it needs a direct
    connection of its own), else the URL every statement uses."""
    return settings.listen_database_url if settings.database_url and settings.listen_database_url else url


def create_app(settings: Settings, *, embedded: EmbeddedPostgres | None = None) -> Litestar:
    mcp = McpSurface(settings)
    # A2A pushes are signed with the hook secret: offered only when it is set.
    push = StorePushNotifications() if settings.hook_secret else None
    a2a = A2ASurface(settings, mcp, push=push)
    oauth = OAuthServer(settings) if settings.oauth_enabled else None
    metrics = metrics_mod.Metrics(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        owned_embedded = None
        url = settings.database_url
        if not url:
            owned_embedded = embedded or EmbeddedPostgres(settings.data_dir)
            url = await asyncio.to_thread(owned_embedded.start)
        try:
            applied = await migrate(url)
            if applied:
                log.info("migrated: %s", ", ".join(applied))
            pool = await open_pool(url, wait_seconds=settings.db_wait_seconds)
            store = Store(pool, settings)
            store.observers.append(metrics.observe)
            fanout = Fanout(listen_url_of(settings, url))
            store.use_pause_cache(PauseCache(store, fanout))
            # Presence writes on a connection of its own: a burst of requests queued on the
            # pool cannot hold back the registration every new listener waits on.
            presence_pool = await open_pool(url, min_size=1, max_size=1, wait_seconds=settings.db_wait_seconds)
            fanout.presence = Presence(Store(presence_pool, settings), fanout)
            await fanout.start()
            fanout.presence.start()
            sweeps = Sweeps(store, settings)
            due_timer = DueTimer(store, fanout)
            hooks = TransitionHooks(store)
            delivery = HookDelivery(store, settings, bodies={PUSH_EVENT: push_body} if push else None)
            # A transition committed here that wrote hook events wakes delivery at once;
            # events committed by other processes are found by the poll.
            store.observers.append(lambda t: delivery.wake() if t.state == "pending" or t.dead_letter else None)
            runtime = Runtime(settings, store, fanout, metrics, url, hooks)
            app.state.runtime = runtime
            app.state.board_rows = rows = BoardRows(app, store, fanout)
            rows.start()
            log.info("database: %s", database_label(url))
            try:
                async with mcp.running(store, fanout, metrics), a2a.running(store, fanout), \
                        (push.running(store) if push else contextlib.nullcontext()), \
                        (oauth.running(store) if oauth else contextlib.nullcontext()):
                    sweeps.start()
                    due_timer.start()
                    delivery.start()
                    yield
            finally:
                await delivery.stop()
                await rows.stop()
                await hooks.drain()
                await sweeps.stop()
                await due_timer.stop()
                await fanout.presence.stop()
                await fanout.stop()
                await presence_pool.close()
                await pool.close()
        finally:
            if owned_embedded is not None and embedded is None:
                await asyncio.to_thread(owned_embedded.stop)

    return Litestar(
        route_handlers=[*web.route_handlers(), mcp.mount(), *a2a.mount(), *(oauth.mounts() if oauth else []),
                        metrics.route(),
                        *health.route_handlers()],
        middleware=[web.security_headers_middleware, web.deadline_middleware],
        template_config=web.template_config(),
        lifespan=[lifespan],
        state=State({"settings": settings, "mcp": mcp, "oauth": oauth}),
        exception_handlers=web.exception_handlers(),
        # Litestar's default would reconfigure the root logger with its own unescaped
        # format; logging is board/logs.py's, set up by the CLI.
        logging_config=None,
        debug=False,
    )

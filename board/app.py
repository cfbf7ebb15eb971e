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
import os
import signal
import threading
from dataclasses import dataclass
from typing import AsyncIterator

from litestar import Litestar
from litestar.datastructures import State

from board import logs
from board.ops import health

from board.web import routes as web
from board.web.events import BoardRows
from board.web.templating import compile_templates
from board.ops import metrics as metrics_mod
from board.config import Settings, from_env
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
from board.ops.tracing import Tracing

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
    draining: bool = False  # SIGTERM or SIGINT came (Drain): /readyz answers 503


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


def tune_collector() -> None:
    """What startup made (modules, the app, its pools) lives as long as the process: frozen
    out of the collector's sight, and the youngest generation collected every 10,000
    allocations rather than 700, so far fewer objects reach the oldest one. Under a thousand
    live streams its full collections had paused the loop 100-170 ms each, a few times a
    second (docs/performance.md)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def proxy_options(settings: Settings) -> dict:
    """uvicorn's proxy header options: X-Forwarded-For and -Proto believed from the trusted
    proxies only (the client is the right-most forwarded address that is not one), from no
    peer when none are named."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": list(settings.trusted_proxies)}


def uvicorn_options(settings: Settings, host: str, port: int) -> dict:
    """uvicorn's settings for `serve`, one process or several."""
    # log_config=None: uvicorn adds no handlers of its own, so its records (the access log
    # included) reach the root handler and its escaping formatter (board/logs.py).
    # Proxy headers only from SWITCHBOARD_TRUSTED_PROXIES: uvicorn's own default
    # (FORWARDED_ALLOW_IPS, else 127.0.0.1 and ::1) would let any loopback peer name its address.
    return dict(host=host, port=port, log_level="info", log_config=None,
                timeout_graceful_shutdown=settings.shutdown_grace_seconds, **proxy_options(settings),
                loop=UVICORN_LOOP, http=UVICORN_HTTP)


def serve(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """Run the app under uvicorn until SIGINT or SIGTERM, which drain it (Drain). With
    several workers, uvicorn's supervisor runs them on one socket and replaces any that dies;
    this process starts the embedded Postgres they share (when DATABASE_URL is unset) and
    migrates once before they start."""
    import uvicorn

    if workers == 1:
        app = create_app(settings, owns_process=True)
        compile_templates()  # before the first request that renders one (and frozen with the rest)
        uvicorn.Server(uvicorn.Config(ServerScope(app), **uvicorn_options(settings, host, port))).run()
        return
    from uvicorn.supervisors import Multiprocess

    embedded = None
    url = settings.database_url
    if not url:
        embedded = EmbeddedPostgres(settings.data_dir)
        url = embedded.start()
        # The workers read their settings from the environment (serving_app): they use this
        # Postgres as one process would use its own embedded one.
        os.environ["DATABASE_URL"] = url
        os.environ.pop("SWITCHBOARD_LISTEN_DATABASE_URL", None)
    try:
        applied = asyncio.run(migrate(url))
        if applied:
            log.info("migrated: %s", ", ".join(applied))
        config = uvicorn.Config("board.app:serving_app", factory=True, workers=workers,
                                **uvicorn_options(settings, host, port))
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    finally:
        if embedded is not None:
            embedded.stop()


def serving_app() -> ServerScope:
    """The app of one of `serve --workers N`'s processes: uvicorn imports and calls this in
    each, so each reads the settings, sets up logging and opens its pools itself."""
    settings = from_env()
    logs.configure(settings.log_format)
    compile_templates()
    return ServerScope(create_app(settings, owns_process=True))


class Drain:
    """What SIGTERM and SIGINT do to a serving process: /readyz answers 503 at once; the
    process serves on for SWITCHBOARD_SHUTDOWN_DELAY_SECONDS (so a balancer's health check
    takes it out first), then hands the signal to uvicorn, which stops accepting and gives the
    calls in flight up to SWITCHBOARD_SHUTDOWN_GRACE_SECONDS, while every Board stream and
    MCP listen stream is told to end (so the graceful shutdown does not wait them out; their
    clients reconnect, to another process). A second signal skips what is left of the delay.

    Installed over uvicorn's own handlers, which it calls: with several workers each
    process's server is uvicorn's, not one of ours."""

    def __init__(self, runtime: "Runtime", delay: float):
        self.runtime = runtime
        self.delay = delay
        self.loop = asyncio.get_running_loop()
        self._previous: dict = {}
        self._delaying = False
        self._stopping = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # an app run inside a test's thread: signals are not its to take
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            if callable(previous):  # the server's handler; left alone where there is none
                self._previous[sig] = previous
                signal.signal(sig, self._signalled)

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _signalled(self, sig, frame) -> None:
        self.runtime.draining = True
        if self._stopping or self._delaying or self.delay <= 0:
            self._stop(sig, frame)
            return
        self._delaying = True
        self.loop.call_soon_threadsafe(self._wait, sig, frame)

    def _wait(self, sig, frame) -> None:
        log.info("draining: /readyz answers 503; stopping in %.1f s", self.delay)
        self.loop.call_later(self.delay, lambda: None if self._stopping else self._stop(sig, frame))

    def _stop(self, sig, frame) -> None:
        if not self._stopping:
            self._stopping = True
            self.runtime.fanout.shutdown_threadsafe()
        self._previous[sig](sig, frame)


def listen_url_of(settings: Settings, url: str) -> str:
    """Where the process's LISTEN connection goes: SWITCHBOARD_LISTEN_DATABASE_URL when
    DATABASE_URL is set (a transaction pooler cannot hold a LISTEN, so it needs a direct
    connection of its own), else the URL every statement uses."""
    return settings.listen_database_url if settings.database_url and settings.listen_database_url else url


def create_app(settings: Settings, *, embedded: EmbeddedPostgres | None = None, owns_process: bool = False,
               tracing: Tracing | None = None) -> Litestar:
    """The app. owns_process: it is what this process serves (`serve`), so it takes the
    exit signals (Drain) and tunes the collector once started. Traces are exported when the
    environment names an OTLP endpoint (docs/tracing.md), or to `tracing`'s provider when one
    is given (the tests')."""
    tracing = tracing or Tracing.from_environment()
    mcp = McpSurface(settings, tracing=tracing)
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
        if tracing is not None:
            tracing.start()
        on_connect = tracing.instrument_connection if tracing is not None else None
        try:
            # Directly when a LISTEN URL is set: a migration must not be split by a transaction pooler.
            applied = await migrate(listen_url_of(settings, url))
            if applied:
                log.info("migrated: %s", ", ".join(applied))
            pool = await open_pool(url, wait_seconds=settings.db_wait_seconds, prepare=settings.prepared_statements,
                                   on_connect=on_connect)
            store = Store(pool, settings)
            store.observers.append(metrics.observe)
            if tracing is not None:
                tracing.observe_store(store)
            fanout = Fanout(listen_url_of(settings, url))
            store.use_pause_cache(PauseCache(store, fanout))
            # Presence writes on a connection of its own: a burst of requests queued on the
            # pool cannot hold back the registration every new listener waits on.
            presence_pool = await open_pool(url, min_size=1, max_size=1, wait_seconds=settings.db_wait_seconds,
                                            prepare=settings.prepared_statements, on_connect=on_connect)
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
            drain = Drain(runtime, settings.shutdown_delay_seconds)
            try:
                async with mcp.running(store, fanout, metrics), a2a.running(store, fanout), \
                        (push.running(store) if push else contextlib.nullcontext()), \
                        (oauth.running(store) if oauth else contextlib.nullcontext()):
                    sweeps.start()
                    due_timer.start()
                    delivery.start()
                    if owns_process:
                        drain.install()
                        tune_collector()
                    yield
            finally:
                drain.uninstall()
                await delivery.stop()
                await rows.stop()
                await hooks.drain()
                await sweeps.stop()
                await due_timer.stop()
                await fanout.presence.stop()
                await fanout.stop()
                await presence_pool.close()
                if tracing is not None:
                    await tracing.stop()
                await pool.close()
        finally:
            if owned_embedded is not None and embedded is None:
                await asyncio.to_thread(owned_embedded.stop)

    app = Litestar(
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
    if tracing is not None:  # around the whole handler, where Litestar's own OpenTelemetry plugin goes
        app.asgi_handler = tracing.asgi(app.asgi_handler)
    return app

"""Health endpoints for load balancers and orchestrators.

- GET /healthz: the process is up and serving HTTP. 200 "ok"; never touches the database.
- GET /readyz: ready for traffic: Postgres answers within READY_TIMEOUT_SECONDS and every
  migration this build knows is applied. 200 "ready", otherwise 503 "not ready" with
  Retry-After; 503 "draining" from the moment the process is told to stop (SIGTERM or
  SIGINT, board/app.py's Drain), so a balancer sends it nothing new.

Neither needs a session or a token, neither is behind the Board's sign-in redirect, and
neither says more than that: no version, no error text.
"""

from __future__ import annotations

from litestar import Request, Response, get

from board.store.db import load_migrations

READY_TIMEOUT_SECONDS = 2.0
RETRY_AFTER_SECONDS = 5
_HEADERS = {"cache-control": "no-store"}


def route_handlers() -> list:
    known_version = load_migrations()[-1].version  # the newest migration this build ships

    @get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        return Response(b"ok\n", media_type="text/plain", headers=_HEADERS)

    @get("/readyz", include_in_schema=False)
    async def readyz(request: Request) -> Response:
        runtime = request.app.state.runtime
        if runtime.draining:
            return _unready(b"draining\n")
        if await runtime.store.schema_ready(known_version, timeout=READY_TIMEOUT_SECONDS):
            return Response(b"ready\n", media_type="text/plain", headers=_HEADERS)
        return _unready(b"not ready\n")

    return [healthz, readyz]


def _unready(body: bytes) -> Response:
    return Response(body, status_code=503, media_type="text/plain",
                    headers={**_HEADERS, "retry-after": str(RETRY_AFTER_SECONDS)})

"""Health endpoints for load balancers and orchestrators.

- GET /healthz: the process is up and serving HTTP. 200 "ok"; never touches the database.
- GET /readyz: ready for traffic: Postgres answers within READY_TIMEOUT_SECONDS and every
  migration this build knows is applied. 200 "ready", otherwise 503 "not ready" with
  Retry-After.

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
        store = request.app.state.runtime.store
        if await store.schema_ready(known_version, timeout=READY_TIMEOUT_SECONDS):
            return Response(b"ready\n", media_type="text/plain", headers=_HEADERS)
        return Response(b"not ready\n", status_code=503, media_type="text/plain",
                        headers={**_HEADERS, "retry-after": str(RETRY_AFTER_SECONDS)})

    return [healthz, readyz]

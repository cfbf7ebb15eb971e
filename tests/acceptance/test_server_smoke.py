"""The composed app starts on real Postgres and serves its routes with the security headers."""

import httpx


async def test_metrics_served_with_security_headers(live_server):
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        r = await client.get("/metrics")
    assert r.status_code == 200
    assert "# TYPE switchboard_todos gauge" in r.text
    assert "# TYPE switchboard_claims_total counter" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"]

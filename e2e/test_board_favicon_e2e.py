"""The Board's icon in Chromium: the sign-in page loads its SVG icon under the Board's CSP, and
a browser that asks for /favicon.ico gets the same icon, never a 404 in its console."""

from __future__ import annotations

from e2e.conftest import no_csp_errors


async def test_the_board_icon_loads_and_favicon_ico_is_no_404(page):
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    await page.goto("/login")
    href = await page.locator('link[rel="icon"]').get_attribute("href")
    assert href == "/static/favicon.svg"
    loaded = await page.evaluate("""href => new Promise(resolve => {
        const img = new Image(); img.onload = () => resolve(img.naturalWidth); img.onerror = () => resolve(0);
        img.src = href; })""", href)
    assert loaded > 0, "the icon did not load as an image"
    icon = await page.goto("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert failed == [] and page.console_errors == [], (failed, page.console_errors)
    no_csp_errors(page)

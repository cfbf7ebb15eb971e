"""The Schedules page in a real browser: a schedule added through the form after its
preview showed the next three runs in its time zone (live as the fields change, and by the
Preview button), a bad cron expression and an unknown zone named at their fields, pause,
resume and remove (which asks first), by keyboard; zero axe violations in light and dark."""

from __future__ import annotations

import re

from playwright.async_api import Page, expect

from e2e.conftest import make_human, no_csp_errors, sign_in
from e2e.test_board_claim_order_e2e import assert_accessible_both
from e2e.test_board_e2e import tab_to
from tests.conftest import make_agent


async def test_a_schedule_is_previewed_added_paused_resumed_and_removed_by_keyboard(page: Page, live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_agent(store, user=ada, agent_id="reporter", queues=("reports",))
    await sign_in(page, "ada")
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedules").click()
    await expect(page.get_by_role("heading", name="Schedules", level=1)).to_be_visible()
    await assert_accessible_both(page, "the Schedules page, empty")

    await page.get_by_label("Queue").select_option("reports")
    await page.get_by_label("Title").fill("Weekday report")
    await page.get_by_label("Time zone").fill("Europe/Berlin")
    await page.get_by_label("Cron expression").fill("0 9 * * 1-5")
    preview = page.locator("#schedule-preview")
    await expect(preview).to_have_attribute("aria-live", "polite")
    times = preview.get_by_role("listitem")
    await expect(times).to_have_count(3)  # live, before any button
    await expect(times.first).to_have_text(re.compile(r"^(Mon|Tue|Wed|Thu|Fri) \d{4}-\d\d-\d\d 09:00 \(\+0[12]:00, CES?T\)$"))

    # A bad expression: the live preview says why, and the Preview button names the field.
    await page.get_by_label("Cron expression").fill("0 25 * * *")
    await expect(preview).to_contain_text("No preview: ")
    await tab_to(page, page.get_by_role("button", name="Preview"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("alert")).to_contain_text("Cron '0 25 * * *' is not a cron expression")
    cron = page.get_by_label("Cron expression")
    await expect(cron).to_have_attribute("aria-invalid", "true")
    await expect(cron).to_have_attribute("aria-describedby", "schedule-cron-help schedule-cron-error")
    await assert_accessible_both(page, "the add form with an error")

    await cron.fill("0 9 * * 1-5")
    await page.get_by_label("Time zone").fill("Europe/Atlantis")
    await page.get_by_role("button", name="Preview").click()
    await expect(page.get_by_label("Time zone")).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("#schedule-timezone-error")).to_contain_text("is not a known IANA time zone")

    await page.get_by_label("Time zone").fill("Europe/Berlin")
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("#schedule-preview").get_by_role("listitem")).to_have_count(3)
    await tab_to(page, page.get_by_role("button", name="Add schedule"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status").filter(has_text="Added the schedule “Weekday report”")).to_be_visible()
    [s] = await store.schedules_list(ada.user_id)
    assert (s["cron"], s["timezone"], s["queue"]) == ("0 9 * * 1-5", "Europe/Berlin", "reports")
    row = page.locator(f"#schedule-{s['id']}")
    await expect(row).to_contain_text("0 9 * * 1-5 in Europe/Berlin")
    await assert_accessible_both(page, "the Schedules page with a schedule")

    await tab_to(page, row.get_by_role("button", name="Pause “Weekday report”"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status").filter(has_text="Paused the schedule")).to_be_visible()
    await expect(page.locator(f"#schedule-{s['id']}")).to_contain_text("paused")
    assert (await store.schedules_list(ada.user_id))[0]["paused"]
    await page.locator(f"#schedule-{s['id']}").get_by_role("button", name="Resume “Weekday report”").click()
    await expect(page.get_by_role("status").filter(has_text="Resumed the schedule")).to_be_visible()

    await tab_to(page, page.locator(f"#schedule-{s['id']}").get_by_role("link", name="Remove “Weekday report”…"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Remove the schedule “Weekday report”?")).to_be_visible()
    await assert_accessible_both(page, "the remove question")
    await tab_to(page, page.get_by_role("button", name="Remove schedule"))
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status").filter(has_text="Removed the schedule")).to_be_visible()
    assert await store.schedules_list(ada.user_id) == []
    assert page.dialogs == []
    no_csp_errors(page)

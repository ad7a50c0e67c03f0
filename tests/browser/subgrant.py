"""Drives a sub-delegated grant in the gateway's inbox page in headless Debian chromium (Playwright, no downloaded
browser).

Usage: subgrant.py BASE_URL TOKEN PARENT_ID SCREENSHOT
Signs in with the principal's inbox token (she holds the active instance PARENT_ID of `shopping`); checks that the
form of `errand` (a template under `shopping`) asks for the instance it comes from, offering hers, and shows the
bound over `parent.cap`; grants one above that bound (the refusal shown next to the field) and then within it, and
checks it listed as sub-delegated from `shopping/PARENT_ID`. Prints the new instance's id on its last line.
"""

import sys

from playwright.sync_api import expect, sync_playwright

import launch


def main() -> int:
    base, token, parent, screenshot = sys.argv[1:5]
    with sync_playwright() as p:
        browser = launch.chromium(
            p,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.goto(f"{base}/inbox")
        page.fill("#token", token)
        page.click("#login button")
        expect(page.locator("section.instance")).to_have_count(1, timeout=10_000)
        form = page.locator('form.grant[data-template="errand"]:not(.change)')
        expect(form).to_be_visible()
        expect(form).to_contain_text("under shopping")
        # No principal to type: the parent instance's is taken; her instance is offered.
        expect(form.locator("input.principal")).to_have_count(0)
        choice = form.locator('.field[data-field="parent"] select.parent')
        expect(choice.locator("option")).to_have_count(1)
        expect(choice).to_have_value(parent)
        small = form.locator('.field[data-field="params.small"]')
        expect(small.locator(".bound")).to_have_text("where small > 0 USD and small <= parent.cap")
        form.locator("input.holder").fill("agent:errands/1")
        small.locator("input.amount").fill("150")
        form.locator("button.grant").click()
        refusal = small.locator(".refusal")
        expect(refusal.locator(".problem")).to_have_text("bound-failed", timeout=10_000)
        expect(refusal.locator(".value")).to_contain_text("150 USD")
        small.locator("input.amount").fill("20")
        form.locator("button.grant").click()
        child = page.locator('section.instance:has-text("sub-delegated from")')
        expect(child).to_have_count(1, timeout=10_000)
        expect(child).to_contain_text(f"shopping/{parent}")
        expect(child).to_contain_text("agent:errands/1")
        expect(child.locator('dd[data-param="small"]')).to_have_text("20 USD")
        page.screenshot(path=screenshot, full_page=True)
        child_id = child.get_attribute("data-id")
        browser.close()
    print("sub-delegated in the page")
    print(child_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Drives the gateway's inbox page in headless Debian chromium (Playwright, no downloaded browser).

Usage: inbox.py BASE_URL TOKEN REQUEST_ID SCREENSHOT
Signs in with the inbox token, checks that the access request shows the exact call and that her mandate is
listed, follows its link to the decision's explanation and checks the path it shows (the grant that matched, the gate that escalated, the missing
approval), comes back, approves it in the page, and waits until the page shows it approved. Exit status 0 when all
of that happened.
"""

import sys

from playwright.sync_api import expect, sync_playwright

import launch


def main() -> int:
    base, token, request_id, screenshot = sys.argv[1:5]
    with sync_playwright() as p:
        browser = launch.chromium(
            p,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.goto(f"{base}/inbox/{request_id}")
        page.fill("#token", token)
        page.click("#login button")
        card = page.locator(f'section.request[data-id="{request_id}"]')
        expect(card).to_be_visible(timeout=10_000)
        expect(card).to_contain_text("agent:shopper asks to call make_payment")
        expect(card).to_contain_text("commercial_terms (wallet)")
        expect(card).to_contain_text("order:991")
        expect(card).to_contain_text("\"amount\":\"80.00 USD\"")
        expect(card).to_contain_text("sha256:")
        expect(card.locator(".status")).to_have_text("pending")
        # Her mandate from the policy's metadata; the wallet has no templates, so no grants part.
        expect(page.locator('section.mandate[data-name="wallet"]')).to_contain_text("agent:shopper")
        expect(page.locator("#granting")).to_be_hidden()
        page.screenshot(path=screenshot.replace(".png", "-pending.png"), full_page=True)
        # The decision's path, in the explanation page (the gateway's HTML in a sandboxed frame).
        card.locator("a.explain").click()
        page.wait_for_url(f"**/inbox/{request_id}/explanation")
        frame = page.frame_locator("iframe#explanation")
        expect(frame.locator("#outcome")).to_have_text("escalate to user:alice", timeout=10_000)
        gate = frame.locator(".step.escalated")
        expect(gate).to_have_count(1)
        expect(gate.locator(".rule")).to_have_text(
            "require approval commercial_terms for make_payment where args.amount > 60 USD"
        )
        expect(gate).to_contain_text('args.amount = "80.00 USD"')
        expect(frame.locator(".step.passed .rule").first).to_contain_text("allow make_payment where args.merchant in")
        expect(frame.locator("li.missing")).to_contain_text("commercial_terms under wallet")
        expect(frame.locator("ul.notes")).to_contain_text(f"access request {request_id}")
        page.screenshot(path=screenshot.replace(".png", "-explanation.png"), full_page=True)
        page.click("#back")
        card = page.locator(f'section.request[data-id="{request_id}"]')
        expect(card.locator(".status")).to_have_text("pending", timeout=10_000)
        card.locator("button.approve").click()
        expect(card.locator(".status")).to_have_text("approved", timeout=10_000)
        expect(card).to_contain_text("user:alice")
        expect(card.locator("button")).to_have_count(0)
        page.screenshot(path=screenshot, full_page=True)
        browser.close()
    print("approved in the page")
    return 0


if __name__ == "__main__":
    sys.exit(main())

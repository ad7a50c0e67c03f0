"""Drives the principal's grants in the gateway's inbox page in headless Debian chromium (Playwright, no downloaded
browser).

Usage: grants.py BASE_URL TOKEN UNTIL SCREENSHOT
Signs in with the principal's inbox token; checks that her static mandate is listed and that the template's form
shows each parameter's bound and the holder and `for` patterns; grants an instance with a cap above its bound and
checks the refusal (problem, field, condition, value) next to the cap's field and that nothing was granted; grants
it within the bounds (every parameter type of the form: a set from the bound's list, money with its currency, a
timestamp, an enum, a duration, an identity, a set of strings, an int) and checks it listed at version 1; narrows it
(a cap above the bound refused in the narrowing form, then a smaller cap: version 2 shown); revokes it (the status
shows `revoked`, and no button is left). Prints the instance's id on its last line. Exit status 0 when all of that
happened.
"""

import sys

from playwright.sync_api import expect, sync_playwright

import launch


def main() -> int:
    base, token, until, screenshot = sys.argv[1:5]
    with sync_playwright() as p:
        browser = launch.chromium(
            p,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/inbox")
        page.fill("#token", token)
        page.click("#login button")
        # Her static mandate, from the policy's metadata.
        mandate = page.locator('section.mandate[data-name="household"]')
        expect(mandate).to_be_visible(timeout=10_000)
        expect(mandate).to_contain_text("agent:butler")
        expect(page.locator("#instances")).to_have_text("No grants.")
        # The template's form: the bounds next to their fields, the patterns.
        form = page.locator('form.grant[data-template="shopping"]:not(.change)')
        expect(form).to_be_visible()
        expect(form).to_contain_text("under ceiling")
        expect(form.locator('.field[data-field="holder"] .hint')).to_have_text('held by any id under "agent:"')
        expect(form.locator('.field[data-field="principal"] .hint')).to_have_text('for any id under "user:"')
        expect(form).to_contain_text('the principal, any id under "ops:"')
        cap = form.locator('.field[data-field="params.cap"]')
        expect(cap.locator(".bound")).to_have_text("where cap > 0 USD and cap <= 500 USD")
        expect(cap.locator("input.currency")).to_have_value("USD")
        expect(form.locator('.field[data-field="params.until"] .bound')).to_have_text(
            "where until - granted <= 30d"
        )
        expect(form.locator('.field[data-field="params.tries"] .bound')).to_have_text("where tries <= 5")
        # The principal is hers, and she may not grant for anyone else (only `ops:` may).
        expect(form.locator("input.principal")).to_have_value("user:alice")
        expect(form.locator("input.principal")).not_to_be_editable()

        # A cap above the bound: refused, the refusal next to the cap.
        form.locator("input.holder").fill("agent:shopper")
        form.locator('.field[data-field="params.merchants"] input[value="acme"]').check()
        cap.locator("input.amount").fill("600")
        form.locator('.field[data-field="params.until"] input').fill(until)
        form.locator('.field[data-field="params.tier"] select').select_option("plus")
        form.locator('.field[data-field="params.cooldown"] input').fill("2")
        form.locator('.field[data-field="params.cooldown"] select').select_option("h")
        form.locator('.field[data-field="params.receipts_to"] input').fill("user:alice")
        form.locator('.field[data-field="params.tags"] textarea').fill("weekly\nfood")
        form.locator('.field[data-field="params.tries"] input').fill("3")
        form.locator("button.grant").click()
        refusal = cap.locator(".refusal")
        expect(refusal.locator(".problem")).to_have_text("bound-failed", timeout=10_000)
        expect(refusal.locator(".field-name")).to_have_text("params.cap")
        expect(refusal.locator(".condition")).to_have_text("cap > 0 USD and cap <= 500 USD")
        expect(refusal.locator(".value")).to_contain_text("600 USD")
        expect(page.locator("#instances")).to_have_text("No grants.")
        page.screenshot(path=screenshot.replace(".png", "-refused.png"), full_page=True)

        # Within the bounds: granted, listed at version 1 with its parameters, holder and window.
        cap.locator("input.amount").fill("100")
        form.locator("button.grant").click()
        instance = page.locator("section.instance")
        expect(instance).to_have_count(1, timeout=10_000)
        instance_id = instance.get_attribute("data-id")
        expect(instance.locator(".status")).to_have_text("active")
        expect(instance).to_contain_text("version 1")
        expect(instance).to_contain_text("agent:shopper")
        expect(instance.locator('dd[data-param="cap"]')).to_have_text("100 USD")
        expect(instance.locator('dd[data-param="merchants"]')).to_have_text('["acme"]')
        expect(instance.locator('dd[data-param="tier"]')).to_have_text("plus")
        expect(instance.locator('dd[data-param="cooldown"]')).to_have_text("2h")
        expect(instance.locator('dd[data-param="tags"]')).to_have_text('["weekly","food"]')
        expect(instance.locator('dd[data-param="tries"]')).to_have_text("3")
        expect(instance).to_contain_text(f"… → {until}Z")
        expect(instance).to_contain_text("user:alice at ")

        # Narrowing: the form is filled with the current version; a cap above the bound is refused there too.
        instance.locator("button.narrow").click()
        change = instance.locator("form.change")
        change_cap = change.locator('.field[data-field="params.cap"]')
        expect(change_cap.locator("input.amount")).to_have_value("100")
        expect(change.locator('.field[data-field="params.tier"] select')).to_have_value("plus")
        change_cap.locator("input.amount").fill("900")
        change.locator("button.change").click()
        expect(change_cap.locator(".refusal .value")).to_contain_text("900 USD", timeout=10_000)
        expect(instance).to_contain_text("version 1")
        change_cap.locator("input.amount").fill("40")
        change.locator("button.change").click()
        expect(instance).to_contain_text("version 2", timeout=10_000)
        expect(instance.locator('dd[data-param="cap"]')).to_have_text("40 USD")
        expect(instance.locator('dd[data-param="tier"]')).to_have_text("plus")
        page.screenshot(path=screenshot.replace(".png", "-narrowed.png"), full_page=True)

        # Revoking.
        instance.locator("button.revoke").click()
        expect(instance.locator(".status")).to_have_text("revoked", timeout=10_000)
        expect(instance).to_contain_text("revoked at")
        expect(instance.locator("button")).to_have_count(0)
        page.screenshot(path=screenshot, full_page=True)
        browser.close()
    print("granted, narrowed and revoked in the page")
    print(instance_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())

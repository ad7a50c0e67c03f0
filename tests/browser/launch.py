"""Starting Debian's chromium for the browser tests (pictures.py, inbox.py), with a retry of the start only.

A browser that dies while it starts (seen once on a test host: a SIGSEGV in chromium's launch, before any page was
opened) says nothing of the pages under test, so it is started again, at most ATTEMPTS times in all. Nothing after
the launch is ever retried: a page that fails its checks fails the test.
"""

import sys

from playwright.sync_api import Error

ATTEMPTS = 3


def chromium(playwright, **options):
    """`playwright.chromium.launch` of /usr/bin/chromium (never a downloaded browser) with `options`."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return playwright.chromium.launch(executable_path="/usr/bin/chromium", **options)
        except Error as e:
            if attempt == ATTEMPTS:
                raise
            first = (str(e).splitlines() or ["?"])[0]
            print(f"chromium did not start (attempt {attempt} of {ATTEMPTS}): {first}", file=sys.stderr)

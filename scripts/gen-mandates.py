#!/usr/bin/env python3
"""Generates a policy with many root mandates over one tool, for timing `remit check` and `remit build` as the
number of mandates grows (BENCHMARKS.md, "Compile time"). Nothing it writes is committed.

    scripts/gen-mandates.py OUT_FILE [--mandates 2000]

Each mandate has its own holder and principal, grants the tool under a condition on its argument, forbids one
value, limits an amount and requires an approval above a threshold: the shape of a per-customer mandate.
"""

import argparse

HEADER = """approval sign_off {
  binds target
  ttl 1h
}

tool pay(amount: money, merchant: string, memo: string) {
  effects financial_operation
  level local_change
  side effects
}
"""


def mandate(i):
    return f"""mandate m{i} for "org:customer-{i}" {{
  holder "agent:assistant-{i}"
  purpose "pay the bills of customer {i}"
  allow pay where args.merchant in ["shop-{i}", "utility-{i % 97}"]
  forbid pay where args.memo == "blocked-{i}"
  limit pay: args.amount <= {100 + i % 900} USD
  require approval sign_off for pay where args.amount > {50 + i % 50} USD
}}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--mandates", type=int, default=2000)
    args = parser.parse_args()
    with open(args.out, "w") as f:
        f.write(HEADER)
        for i in range(args.mandates):
            f.write("\n" + mandate(i))


if __name__ == "__main__":
    main()

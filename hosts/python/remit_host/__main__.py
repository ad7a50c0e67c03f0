"""`python -m remit_host [--visible-tools] [--fuel N] POLICY.wasm REQUEST...`: one result per request, one per line,
byte for byte (as tests/node/decide.mjs). `--frames IN` instead reads requests from a file of frames (a 4-byte
big-endian length, then that many bytes) and writes the results as frames to stdout: how the test suite sends
thousands of requests, garbage included, through one reused instance."""

import argparse
import struct
import sys

from . import DEFAULT_FUEL, LoadError, Policy


def frames(data: bytes):
    at = 0
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        yield data[at + 4 : at + 4 + length]
        at += 4 + length


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m remit_host")
    parser.add_argument("--visible-tools", action="store_true", help="the tool listing instead of the decision")
    parser.add_argument("--fuel", type=int, default=DEFAULT_FUEL, help="the fuel budget of one call")
    parser.add_argument("--frames", metavar="IN", help="read requests as length-prefixed frames, write frames")
    parser.add_argument("policy", help="a decision module (.wasm)")
    parser.add_argument("requests", nargs="*", help="request files (JSON bytes)")
    args = parser.parse_args()
    try:
        policy = Policy.load(args.policy, fuel=args.fuel)
    except (OSError, LoadError) as error:
        print(f"error: {args.policy}: {error}", file=sys.stderr)
        return 1
    evaluator = policy.evaluator()
    call = evaluator.visible_tools if args.visible_tools else evaluator.decide
    out = sys.stdout.buffer
    if args.frames:
        with open(args.frames, "rb") as f:
            for request in frames(f.read()):
                result = call(request)
                out.write(struct.pack(">I", len(result)) + result)
    else:
        for path in args.requests:
            with open(path, "rb") as f:
                out.write(call(f.read()) + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

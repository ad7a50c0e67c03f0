"""A naive MCP server for tests/mcp_hardening.rs, on the standard library only: over stdio, one JSON-RPC message per
line. Unlike the official SDKs it runs every `tools/call` it reads, a request or a notification (no `id`) alike, and
it appends each message it gets (`method`, `id`, the tool's `name`) to the file named by its argument, one JSON line
each, so that a test can tell what reached it. Its tool `big` answers with 5 MiB of text on one line.

    server.py RECORD_FILE
"""

import json
import sys

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "big", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "send_payment",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount": {"type": "string"}},
        },
    },
    # Not in the policy: the proxy must never let it run.
    {"name": "wipe_disk", "inputSchema": {"type": "object", "properties": {}}},
]


def run(name, arguments):
    if name == "echo":
        return arguments.get("text", "")
    if name == "big":
        return "x" * (5 << 20)
    if name == "send_payment":
        return "paid %s to %s" % (arguments.get("amount"), arguments.get("to"))
    if name == "wipe_disk":
        return "wiped"
    return None


def main():
    record = open(sys.argv[1], "a")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        params = message.get("params") or {}
        if not isinstance(method, str):
            continue
        seen = {"method": method, "id": message.get("id"), "name": params.get("name")}
        record.write(json.dumps(seen) + "\n")
        record.flush()
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "naive", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            text = run(params.get("name"), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": text}], "isError": text is None}
        elif method == "ping":
            result = {}
        else:
            result = None
        if "id" not in message:
            continue
        if result is None:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


main()

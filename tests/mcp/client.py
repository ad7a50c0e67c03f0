"""A real MCP client (the official Python SDK, `mcp` from PyPI, pinned in requirements.txt) driving
`remit mcp-proxy` over stdio, for tests/mcp_proxy.rs.

Usage: client.py --cwd DIR --token OWNER_TOKEN --errlog FILE [--stateless] -- PROXY_COMMAND...   (stdio: the client
                 starts the proxy)
       client.py --http URL --agent-token TOKEN --token OWNER_TOKEN [--stateless]  (Streamable HTTP: a running proxy)

With --stateless the client speaks the stateless revision 2026-07-28: `server/discover` instead of `initialize`, and
every request carries its revision in `_meta` (over HTTP also its method and tool in the `Mcp-Method` / `Mcp-Name`
headers).

It lists the tools, reads inside the workspace, tries a path traversal, writes (escalated), approves the access
request over the inbox's HTTP API with the owner's token, writes again (allowed) and once more (escalated again),
and prints what it saw as one JSON object on stdout; the Rust test checks it.
"""

import argparse
import asyncio
import json
import sys
import urllib.request

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def wire(result):
    """A tool result as it was on the wire (camelCase, `_meta`)."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def text(result):
    return "\n".join(c.get("text", "") for c in result.get("content", []))


async def main(args):
    if args.http:
        import httpx2

        headers = {"Authorization": f"Bearer {args.agent_token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(args.http, http_client=http) as streams:
                return await run(streams[0], streams[1], args.token, args.stateless)
    server = StdioServerParameters(command=args.command[0], args=args.command[1:], cwd=args.cwd)
    with open(args.errlog, "w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write):
            return await run(read, write, args.token, args.stateless)


async def run(read, write, owner_token, stateless=False):
    report = {}
    async with ClientSession(read, write, read_timeout_seconds=30) as session:
        if stateless:
            await session.discover()
        else:
            await session.initialize()
        report["server"] = session.server_info.name
        report["protocol"] = session.protocol_version
        tools = await session.list_tools()
        report["tools"] = sorted(t.name for t in tools.tools)

        read_ok = wire(await session.call_tool("read_text_file", {"path": "workspace/a.txt"}))
        report["read"] = {"is_error": read_ok.get("isError", False), "text": text(read_ok)}

        traversal = wire(await session.call_tool("read_text_file", {"path": "workspace/../secret.txt"}))
        report["traversal"] = {"is_error": traversal.get("isError", False), "text": text(traversal)}

        arguments = {"path": "workspace/from-sdk.txt", "content": "written through the SDK\n"}
        first = wire(await session.call_tool("write_file", arguments))
        access = first["_meta"]["remit.dev/decision"]["access_request"]
        report["escalated"] = {"is_error": first.get("isError", False), "text": text(first),
                               "access_request": access["id"]}

        approve = access["url"].replace("/inbox/", "/inbox/api/requests/") + "/approve"
        request = urllib.request.Request(approve, method="POST",
                                         headers={"Authorization": f"Bearer {owner_token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            report["approved"] = answer.status

        second = wire(await session.call_tool("write_file", arguments))
        report["retried"] = {"is_error": second.get("isError", False), "text": text(second),
                             "outcome": second["_meta"]["remit.dev/decision"]["outcome"]}
        third = wire(await session.call_tool("write_file", arguments))
        report["again"] = {"is_error": third.get("isError", False), "text": text(third)}
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cwd")
    parser.add_argument("--token", required=True)
    parser.add_argument("--errlog")
    parser.add_argument("--http")
    parser.add_argument("--agent-token")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    print(json.dumps(asyncio.run(asyncio.wait_for(main(args), timeout=120))))

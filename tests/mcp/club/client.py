"""The club scenario (examples/club) through `remit mcp-proxy`, driven by the official Python SDK's client, for
tests/mcp_proxy.rs. For each lane it lists the tools and calls every one of the club's fifteen tools, and prints
what it saw as one JSON object: {lane: {"tools": [...], "calls": {tool: {"is_error", "outcome", "text"}}}}. A call
the SDK raises an MCP error for (over HTTP, the proxy's `403 insufficient_scope`) is recorded with the error's
`code`, its message as `text`, the decision from its data, and the response's `WWW-Authenticate` challenge.

Usage: client.py --lane NAME -- PROXY_COMMAND...          (stdio: the client starts the proxy, one lane)
       client.py --http URL --lane NAME=TOKEN [--lane ...]  (Streamable HTTP: a running proxy, a token per lane)
"""

import argparse
import asyncio
import json

from mcp import ClientSession, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ARGUMENTS = {
    "club_info": {"topic": "history"},
    "opening_hours": {"weekday": "monday"},
    "membership_fees": {"category": "adult"},
    "application_status": {"application_id": "app-0457"},
    "trial_session_slots": {"week": "2026-W50"},
    "interview_slots": {"week": "2026-W50"},
    "required_documents": {"category": "adult"},
    "beginner_course_dates": {"month": "2027-01"},
    "safety_rules": {"topic": "winter"},
    "equipment_rental_prices": {"item": "single scull"},
    "boat_availability": {"boat_class": "eight", "date": "2026-12-06T09:00:00Z"},
    "crew_schedule": {"week": "2026-W50"},
    "regatta_entries": {"regatta": "harbour-cup"},
    "locker_assignment": {"member_id": "m-0192"},
    "export_roster": {"format": "csv"},
}


async def lane(read, write, challenges=None):
    seen = {"calls": {}}
    async with ClientSession(read, write, read_timeout_seconds=30) as session:
        await session.initialize()
        tools = await session.list_tools()
        seen["tools"] = sorted(t.name for t in tools.tools)
        for tool, arguments in ARGUMENTS.items():
            try:
                result = (await session.call_tool(tool, arguments)).model_dump(by_alias=True, mode="json",
                                                                                exclude_none=True)
            except MCPError as e:
                data = e.data if isinstance(e.data, dict) else {}
                seen["calls"][tool] = {
                    "is_error": True,
                    "code": e.code,
                    "outcome": data.get("_meta", {}).get("remit.dev/decision", {}).get("outcome"),
                    "text": e.message,
                    "challenge": challenges.pop() if challenges else None,
                }
                continue
            decision = result.get("_meta", {}).get("remit.dev/decision", {})
            seen["calls"][tool] = {
                "is_error": result.get("isError", False),
                "outcome": decision.get("outcome"),
                "text": "\n".join(c.get("text", "") for c in result.get("content", [])),
            }
    return seen


async def main(args):
    report = {}
    if args.http:
        import httpx2

        for spec in args.lane:
            name, token = spec.split("=", 1)
            challenges = []

            async def record(response, challenges=challenges):
                if response.status_code == 403:
                    challenges.append(response.headers.get("www-authenticate"))

            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30,
                                          event_hooks={"response": [record]}) as http:
                async with streamable_http_client(args.http, http_client=http) as streams:
                    report[name] = await lane(streams[0], streams[1], challenges)
        return report
    server = StdioServerParameters(command=args.command[0], args=args.command[1:])
    async with stdio_client(server) as (read, write):
        report[args.lane[0]] = await lane(read, write)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http")
    parser.add_argument("--lane", action="append", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    print(json.dumps(asyncio.run(asyncio.wait_for(main(args), timeout=120))))

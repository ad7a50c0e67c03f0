"""An MCP server of the official Python SDK (tests/mcp/requirements.txt), for tests/mcp_proxy.rs: it speaks both the
stateless revision 2026-07-28 and the earlier ones, and its tool `revision` says which one a call came in, so a test
can tell which one `remit mcp-proxy` spoke to it. Its tool `grow` adds a tool, `grown`, and tells the clients that the
list changed: on their `subscriptions/listen` streams in 2026-07-28, unasked in the earlier revisions. Its tool
`confirm` asks the user before it shouts (an elicitation: in 2026-07-28 an `InputRequiredResult`, answered when the
client calls again with `inputResponses` and the `requestState`).

    server.py                 over stdio
    server.py --http PORT     over Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve

server = MCPServer("revisions")


@server.tool()
def revision(ctx: Context) -> str:
    """The protocol revision this call came in."""
    return ctx.protocol_version or "none"


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


class Sure(BaseModel):
    sure: bool


def ask_first(text: str) -> Elicit[Sure]:
    return Elicit(f"Shout {text}?", Sure)


@server.tool()
def confirm(text: str, answer: Annotated[Sure, Resolve(ask_first)]) -> str:
    """The text in capitals, once the user said so."""
    return text.upper() if answer.sure else "not shouted"


def grown() -> str:
    """A tool that `grow` added."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and announces the change."""
    server.add_tool(grown)
    await ctx.notify_tools_changed()
    if ctx.protocol_version != "2026-07-28":
        await ctx.session.send_tool_list_changed()
    return "grew"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

"""_PreCompact: pins the decisions the summary of a compaction must keep."""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("decisions")


@mcp.tool(name="_PreCompact")
def pre_compact(cwd: str = "") -> str:
    """Pins DECISIONS.md from the working directory, if there is one."""
    path = os.path.join(cwd or os.getcwd(), "DECISIONS.md")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as decisions:
        return "Decisions taken so far (keep them):\n" + decisions.read(4000)


if __name__ == "__main__":
    mcp.run()

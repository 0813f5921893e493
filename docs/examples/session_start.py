"""_SessionStart: hands the model the project's agent notes once, at the start."""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("agent-notes")


@mcp.tool(name="_SessionStart")
def session_start(cwd: str = "") -> str:
    """Injects AGENTS.md from the working directory, if there is one."""
    path = os.path.join(cwd or os.getcwd(), "AGENTS.md")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as notes:
        return "Notes for agents working here (AGENTS.md):\n" + notes.read(8000)


if __name__ == "__main__":
    mcp.run()

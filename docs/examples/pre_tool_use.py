"""_PreToolUse: refuses tool calls whose arguments hold a forbidden command."""

import json
from typing import Any

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("no-force")

FORBIDDEN = ("rm -rf", "git push --force", "git push -f", "git reset --hard")


@mcp.tool(name="_PreToolUse")
def pre_tool_use(tool: str = "", server: str = "", arguments: dict[str, Any] | None = None) -> str:
    """Refuses a call whose arguments contain a forbidden command."""
    text = json.dumps(arguments or {})
    for command in FORBIDDEN:
        if command in text:
            return f"{server}__{tool} was not run: `{command}` is not allowed here. Find a safer way."
    return ""


if __name__ == "__main__":
    mcp.run()

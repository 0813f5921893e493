"""_PostToolUse: tells the model to change course after repeated failures."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("retry-guard")

failures: dict[str, int] = {}


@mcp.tool(name="_PostToolUse")
def post_tool_use(tool: str = "", server: str = "", is_error: bool = False) -> str:
    """Counts each tool's failures in a row; from the third on, says so."""
    name = f"{server}__{tool}"
    failures[name] = failures.get(name, 0) + 1 if is_error else 0
    if failures[name] < 3:
        return ""
    return f"{name} has failed {failures[name]} times in a row. Read the errors and change the approach."


if __name__ == "__main__":
    mcp.run()

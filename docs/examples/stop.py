"""_Stop: objects while the test suite is red, counting the attempts to finish."""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("tests-green")


@mcp.tool(name="_Stop")
def stop(attempt: int = 0) -> str:
    """Objects while the file RED exists (a test script would create it)."""
    if not os.path.exists("RED"):
        return ""
    text = "The test suite is red; fix it before finishing."
    if attempt > 1:
        text += f" You have tried to finish {attempt} times in this prompt."
    return text


if __name__ == "__main__":
    mcp.run()

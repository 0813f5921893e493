"""_UserPromptSubmit: points out paths in the prompt that do not exist."""

import os
import re

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("prompt-paths")


@mcp.tool(name="_UserPromptSubmit")
def user_prompt_submit(prompt: str = "", cwd: str = "") -> str:
    """Names the paths (words with a `/`) in the prompt that are not there."""
    base = cwd or os.getcwd()
    paths = re.findall(r"[\w.-]+/[\w./-]*\w", prompt)
    missing = [p for p in paths if not os.path.exists(os.path.join(base, p))]
    if not missing:
        return ""
    return "These paths in the prompt do not exist here: " + ", ".join(missing)


if __name__ == "__main__":
    mcp.run()

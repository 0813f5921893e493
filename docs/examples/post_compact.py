"""_PostCompact: re-injects the plan after a compaction, unless it was pinned."""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("plan")


@mcp.tool(name="_PostCompact")
def post_compact(pins: list[dict[str, str]] | None = None) -> str:
    """Re-injects PLAN.md, unless a _PreCompact pin already holds it."""
    if not os.path.isfile("PLAN.md"):
        return ""
    with open("PLAN.md", encoding="utf-8", errors="replace") as plan:
        text = plan.read(4000).strip()
    if not text or any(text in pin.get("text", "") for pin in pins or []):
        return ""
    return "The plan, kept across the compaction:\n" + text


if __name__ == "__main__":
    mcp.run()

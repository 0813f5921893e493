"""_SessionEnd: notes in a log file when and why each session ended."""

import datetime
import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("session-log")


@mcp.tool(name="_SessionEnd")
def session_end(session_id: str = "", reason: str = "", cwd: str = "") -> str:
    """Appends one line to .sprout-sessions.log; the agent ignores the answer."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(os.path.join(cwd or os.getcwd(), ".sprout-sessions.log"), "a", encoding="utf-8") as log:
        log.write(f"{now} {session_id or '-'} {reason or '-'}\n")
    return ""


if __name__ == "__main__":
    mcp.run()

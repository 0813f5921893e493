#!/usr/bin/env bash
# The MCP conformance suite's client under test: sprout itself.
#
# The suite runs `client.sh URL` with MCP_CONFORMANCE_SCENARIO set, and judges
# what reaches its server at URL. Each scenario Sprout takes part in is a
# plain sprout command against one Streamable HTTP server named `conf`:
#   initialize  sprout hooks list  (initialize, tools/list)
#   tools_call  sprout run, a scripted model calling add_numbers
#   sse-retry   sprout run, a scripted model calling test_reconnection
# The server's tools run by a rule of its entry ("autoApprove"), as a
# person who trusts them would have it [U4]. SPROUT is the binary to run.
set -euo pipefail
url="$1"
sprout="${SPROUT:?set SPROUT to the sprout binary}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '{"mcpServers": {"conf": {"type": "http", "url": "%s", "autoApprove": ["*"]}}}\n' "$url" > "$dir/mcp.json"
call() {
    printf '{"tool_calls": [{"name": "conf__%s", "arguments": %s}]}\n{"text": "done"}\n' "$1" "$2" > "$dir/script.jsonl"
    SPROUT_AGENT_PROVIDER=script SPROUT_AGENT_SCRIPT="$dir/script.jsonl" SPROUT_SESSIONS=off \
        "$sprout" run "conformance: $1" --mcp-config "$dir/mcp.json"
}
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    initialize) "$sprout" hooks list --mcp-config "$dir/mcp.json" ;;
    tools_call) call add_numbers '{"a": 2, "b": 3}' ;;
    sse-retry) call test_reconnection '{}' ;;
    *) echo "client.sh: scenario ${MCP_CONFORMANCE_SCENARIO:-(none)} is not one Sprout takes part in" >&2; exit 2 ;;
esac

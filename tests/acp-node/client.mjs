// Drives `sprout acp` with the official TypeScript ACP SDK and prints one
// JSON line with what happened. Used by tests/tests/cli/acp.rs.
//
// node client.mjs SPROUT_BINARY FIXTURE_BINARY WORKING_DIRECTORY
import { client, ndJsonStream } from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [sprout, fixture, cwd] = process.argv.slice(2);
const agent = spawn(sprout, ["acp"], { stdio: ["pipe", "pipe", "ignore"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const updates = [];
const app = client().onNotification("session/update", (context) => {
  updates.push(context.params.update.sessionUpdate);
});
const result = await app.connectWith(stream, async (sprout) => {
  const init = await sprout.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const session = await sprout.request("session/new", {
    cwd,
    mcpServers: [{ name: "fx", command: fixture, args: ["--tools", "work", "--stop", "text=write the tests,empty"], env: [] }],
  });
  const prompt = await sprout.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "do the work" }],
  });
  return { protocolVersion: init.protocolVersion, agent: init.agentInfo?.name, stopReason: prompt.stopReason, end: prompt._meta?.["sprout/end"]?.reason };
});
agent.stdin.end();
console.log(JSON.stringify({ ...result, updates }));
await new Promise((resolve) => agent.on("exit", resolve));

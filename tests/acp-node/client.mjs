// Drives `sprout acp` with the official TypeScript ACP SDK and prints one
// JSON line with what happened. Used by tests/tests/cli/acp.rs.
//
// node client.mjs SPROUT_BINARY FIXTURE_BINARY WORKING_DIRECTORY
//
// A first `sprout acp` runs a prompt; a second one loads that session
// (`session/load`), which replays its history as updates.
import { client, ndJsonStream } from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [sprout, fixture, cwd] = process.argv.slice(2);

// Runs `work` against a fresh `sprout acp`, collecting the kinds of the
// session/update notifications it sends.
async function withAgent(work) {
  const agent = spawn(sprout, ["acp"], { stdio: ["pipe", "pipe", "ignore"], env: process.env });
  const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
  const updates = [];
  const app = client().onNotification("session/update", (context) => {
    updates.push(context.params.update.sessionUpdate);
  });
  const result = await app.connectWith(stream, work);
  agent.stdin.end();
  await new Promise((resolve) => agent.on("exit", resolve));
  return { ...result, updates };
}

const first = await withAgent(async (sprout) => {
  const init = await sprout.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const session = await sprout.request("session/new", {
    cwd,
    mcpServers: [{ name: "fx", command: fixture, args: ["--tools", "work", "--stop", "text=write the tests,empty"], env: [] }],
  });
  const prompt = await sprout.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "do the work" }],
  });
  return {
    protocolVersion: init.protocolVersion,
    agent: init.agentInfo?.name,
    loadSession: init.agentCapabilities?.loadSession,
    sessionId: session.sessionId,
    stopReason: prompt.stopReason,
    end: prompt._meta?.["sprout/end"]?.reason,
  };
});
const second = await withAgent(async (sprout) => {
  await sprout.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const loaded = await sprout.request("session/load", { sessionId: first.sessionId, cwd, mcpServers: [] });
  return { loaded: loaded !== undefined };
});
console.log(JSON.stringify({ ...first, loaded: second.loaded, replayed: second.updates }));

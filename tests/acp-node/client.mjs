// Drives `sprout acp` with the official TypeScript ACP SDK and prints one
// JSON line with what happened. Used by tests/tests/cli/acp.rs.
//
// node client.mjs SPROUT_BINARY FIXTURE_BINARY WORKING_DIRECTORY
//
// A first `sprout acp` runs a prompt; a second one loads that session
// (`session/load`), which replays its history as updates; a third asks for
// approval of tool calls (SPROUT_AGENT_APPROVAL=ask), answered with each
// option in turn.
import { client, ndJsonStream } from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [sprout, fixture, cwd] = process.argv.slice(2);
// Permission requests seen, and the statuses tool calls ended with.
const asked = [];
let statuses = [];

// Runs `work` against a fresh `sprout acp`, collecting the kinds of the
// session/update notifications it sends.
// `env` is added to this process's environment; `choose()` names the kind
// of option each permission request is answered with ("cancelled": none).
async function withAgent(work, env = {}, choose = () => "cancelled") {
  const agent = spawn(sprout, ["acp"], { stdio: ["pipe", "pipe", "ignore"], env: { ...process.env, ...env } });
  const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
  const updates = [];
  const app = client()
    .onRequest("session/request_permission", (context) => {
      const want = choose();
      const option = context.params.options.find((o) => o.kind === want);
      asked.push({ toolCallId: context.params.toolCall.toolCallId, kinds: context.params.options.map((o) => o.kind) });
      return option
        ? { outcome: { outcome: "selected", optionId: option.optionId } }
        : { outcome: { outcome: "cancelled" } };
    })
    .onNotification("session/update", (context) => {
      const update = context.params.update;
      updates.push(update.sessionUpdate);
      if (update.sessionUpdate === "tool_call_update" && update.status) {
        statuses.push(update.status);
      }
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
const choices = ["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"];
let choice = "";
const approvals = [];
await withAgent(
  async (sprout) => {
    await sprout.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    for (choice of choices) {
      const session = await sprout.request("session/new", {
        cwd,
        mcpServers: [{ name: "fx", command: fixture, args: ["--tools", "work"], env: [] }],
      });
      statuses = [];
      const before = asked.length;
      const prompt = await sprout.request("session/prompt", {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: "do the work" }],
      });
      approvals.push({ choice, stopReason: prompt.stopReason, asked: asked.slice(before), statuses });
    }
  },
  { SPROUT_AGENT_APPROVAL: "ask" },
  () => choice,
);
console.log(JSON.stringify({ ...first, loaded: second.loaded, replayed: second.updates, approvals }));

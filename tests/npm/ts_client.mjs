// A client built on the TypeScript ACP SDK (@agentclientprotocol/sdk, its experimental
// WebSocket and Streamable HTTP transports), for tests/test_host.py: against `acpctl serve`
// it initializes, opens a session, runs a turn whose permission it allows, then, on a
// connection of its own, loads that session twice, and prints what it saw as one JSON
// line (`replayed`: the updates each load had brought when its answer came).
//
//   node ts_client.mjs ws|http URL TOKEN
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const [transport, url, token] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const stream =
  transport === "ws"
    ? createWebSocketStream(url, { headers, WebSocket })
    : createHttpStream(url, { headers });

const updates = [];
let asked = 0;
const app = client({ name: "ts-sdk-test" })
  .onRequest(methods.client.session.requestPermission, async () => {
    asked += 1;
    return { outcome: { outcome: "selected", optionId: "allow" } };
  })
  .onNotification(methods.client.session.update, async ({ params }) => {
    updates.push(params.update);
  });

const result = await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, { protocolVersion: 1 });
  const created = await agent.request(methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
  const turn = await agent.request(methods.agent.session.prompt, {
    sessionId: created.sessionId,
    prompt: [{ type: "text", text: "edit from typescript" }],
  });
  return { protocolVersion: init.protocolVersion, sessionId: created.sessionId, stopReason: turn.stopReason };
});
const text = updates
  .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
  .map((u) => u.content.text)
  .join("");

const stream2 =
  transport === "ws"
    ? createWebSocketStream(url, { headers, WebSocket })
    : createHttpStream(url, { headers });
let seen = 0;
const loader = client({ name: "ts-sdk-loader" }).onNotification(
  methods.client.session.update,
  async () => {
    seen += 1;
  },
);
const replayed = await loader.connectWith(stream2, async (agent) => {
  await agent.request(methods.agent.initialize, { protocolVersion: 1 });
  const counts = [];
  for (let load = 0; load < 2; load++) {
    const before = seen;
    await agent.request(methods.agent.session.load, {
      sessionId: result.sessionId,
      cwd: "/tmp",
      mcpServers: [],
    });
    counts.push(seen - before);
  }
  return counts;
});
console.log(JSON.stringify({ ...result, asked, text, replayed }));
process.exit(0);

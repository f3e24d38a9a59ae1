// A client built on the TypeScript ACP SDK that declares form elicitation, for
// tests/test_host.py: against `acpctl serve` over WebSocket it initializes, opens a session
// and says its id (a JSON line); on a line from stdin it prompts "ask", answers the
// demo agent's form with a name, and says how the turn ended and what it said.
//
//   node ts_elicits.mjs URL TOKEN
import * as readline from "node:readline";
import { client, methods } from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const [url, token] = process.argv.slice(2);
const stream = createWebSocketStream(url, { headers: { Authorization: `Bearer ${token}` }, WebSocket });
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const updates = [];
let asked = 0;
const app = client({ name: "ts-sdk" })
  .onRequest(methods.client.elicitation.create, async () => {
    asked += 1;
    return { action: "accept", content: { name: "Ada", excited: false } };
  })
  .onNotification(methods.client.session.update, async ({ params }) => {
    updates.push(params.update);
  });

const result = await app.connectWith(stream, async (agent) => {
  await agent.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { elicitation: { form: {} } },
    clientInfo: { name: "ts-sdk", version: "1" },
  });
  const created = await agent.request(methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
  process.stdout.write(JSON.stringify({ sessionId: created.sessionId }) + "\n");
  await lines.next();
  const turn = await agent.request(methods.agent.session.prompt, {
    sessionId: created.sessionId,
    prompt: [{ type: "text", text: "ask" }],
  });
  return { stopReason: turn.stopReason };
});
const text = updates
  .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
  .map((u) => u.content.text)
  .join("");
process.stdout.write(JSON.stringify({ ...result, asked, text }) + "\n");
process.exit(0);

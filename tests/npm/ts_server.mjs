// The TypeScript ACP SDK's own remote server (@agentclientprotocol/sdk's experimental
// server and node adapters: Streamable HTTP and WebSocket on /acp), serving an echo agent
// built with the SDK's agent app, for tests/test_remote.py: a remote agent nobody here wrote.
// It loads (replaying what was said), resumes and forks the sessions it holds.
//
//   node ts_server.mjs PORT
import http from "node:http";
import { agent, methods } from "@agentclientprotocol/sdk/unstable";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const port = Number(process.argv[2]);
let sessions = 0;

const said = new Map(); // session id -> what the agent answered in it, for a load's replay

function chunk(text) {
  return { sessionUpdate: "agent_message_chunk", content: { type: "text", text } };
}

function echoAgent() {
  return agent({ name: "ts-sdk-echo" })
    .onRequest(methods.agent.initialize, async () => ({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        sessionCapabilities: { resume: {}, fork: {} },
      },
      agentInfo: { name: "ts-sdk-echo", version: "1.0.0" },
    }))
    .onRequest(methods.agent.session.new, async () => {
      const sessionId = `ts-${++sessions}`;
      said.set(sessionId, []);
      return { sessionId };
    })
    .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
      const text = `ts: ${params.prompt.map((block) => block.text ?? "").join(" ")}`;
      said.get(params.sessionId)?.push(text);
      await client.notify(methods.client.session.update, {
        sessionId: params.sessionId,
        update: chunk(text),
      });
      return { stopReason: "end_turn" };
    })
    .onRequest(methods.agent.session.load, async ({ params, client }) => {
      for (const text of said.get(params.sessionId) ?? []) {
        await client.notify(methods.client.session.update, {
          sessionId: params.sessionId,
          update: chunk(text),
        });
      }
      return {};
    })
    .onRequest(methods.agent.session.resume, async () => ({}))
    .onRequest(methods.agent.session.fork, async ({ params }) => {
      const sessionId = `ts-${++sessions}`;
      said.set(sessionId, [...(said.get(params.sessionId) ?? [])]);
      return { sessionId };
    });
}

const server = new AcpServer({ createAgent: echoAgent });
const handle = createNodeHttpHandler(server);
const sockets = new WebSocketServer({ noServer: true });
const upgrade = createNodeWebSocketUpgradeHandler(server, sockets);
const listener = http.createServer((req, res) => handle(req, res));
listener.on("upgrade", (req, socket, head) => upgrade(req, socket, head));
listener.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));

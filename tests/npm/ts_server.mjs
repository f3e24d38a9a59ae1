// The TypeScript ACP SDK's own remote server (@agentclientprotocol/sdk's experimental
// server and node adapters: Streamable HTTP and WebSocket on /acp), serving an echo agent
// built with the SDK's agent app, for tests/test_remote.py: a remote agent nobody here wrote.
// It loads (replaying what was said), resumes (with a `_meta` of its own) and forks the
// sessions it holds; lists, archives and deletes them (an archived one, "ts-archived",
// from the start; a delete's answer has a `_meta` of its own); and says its commands once
// a session begins, as claude does.
//
// With --stdio, the same agent speaks on its stdin and stdout instead, as an agent an editor
// launches does (tests/test_fidelity_e2e.py runs it behind `acpctl run --acp`).
//
//   node ts_server.mjs PORT
//   node ts_server.mjs --stdio
import http from "node:http";
import { Readable, Writable } from "node:stream";
import { agent, methods, ndJsonStream, RequestError } from "@agentclientprotocol/sdk/unstable";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

let sessions = 0;

const said = new Map(); // session id -> what the agent answered in it, for a load's replay
const archived = new Set(["ts-archived"]);

const COMMANDS = [{ name: "echo", description: "says it back", input: null }];

function chunk(text) {
  return { sessionUpdate: "agent_message_chunk", content: { type: "text", text } };
}

function echoAgent() {
  return agent({ name: "ts-sdk-echo" })
    .onRequest(methods.agent.initialize, async () => ({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        sessionCapabilities: { resume: {}, fork: {}, list: {}, delete: {}, archive: {} },
      },
      agentInfo: { name: "ts-sdk-echo", version: "1.0.0" },
    }))
    .onRequest(methods.agent.session.new, async ({ client }) => {
      const sessionId = `ts-${++sessions}`;
      said.set(sessionId, []);
      setImmediate(() =>
        client.notify(methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "available_commands_update", availableCommands: COMMANDS },
        }),
      );
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
    .onRequest(methods.agent.session.resume, async () => ({ _meta: { "ts/warm": true } }))
    .onRequest(methods.agent.session.list, async ({ params }) => {
      const wanted = params.archived ?? "exclude";
      if (!["exclude", "include", "only"].includes(wanted)) {
        throw RequestError.invalidParams({ archived: wanted });
      }
      const ids = [...said.keys(), "ts-archived"].filter(
        (id) => wanted === "include" || archived.has(id) === (wanted === "only"),
      );
      return {
        sessions: ids.map((sessionId) => ({
          sessionId,
          cwd: "/tmp",
          archived: archived.has(sessionId),
        })),
      };
    })
    .onRequest(methods.agent.session.archive, async ({ params }) => {
      archived.add(params.sessionId);
      return {};
    })
    .onRequest(methods.agent.session.unarchive, async ({ params }) => {
      archived.delete(params.sessionId);
      return {};
    })
    .onRequest(methods.agent.session.delete, async ({ params }) => {
      said.delete(params.sessionId);
      return { _meta: { "ts/freed": 1 } };
    })
    .onRequest(methods.agent.session.fork, async ({ params }) => {
      const sessionId = `ts-${++sessions}`;
      said.set(sessionId, [...(said.get(params.sessionId) ?? [])]);
      return { sessionId };
    });
}

if (process.argv[2] === "--stdio") {
  // Until the editor closes its stdin.
  echoAgent().connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
} else {
  const port = Number(process.argv[2]);
  const server = new AcpServer({ createAgent: echoAgent });
  const handle = createNodeHttpHandler(server);
  const sockets = new WebSocketServer({ noServer: true });
  const upgrade = createNodeWebSocketUpgradeHandler(server, sockets);
  const listener = http.createServer((req, res) => handle(req, res));
  listener.on("upgrade", (req, socket, head) => upgrade(req, socket, head));
  listener.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
}

// The page's connection (acpctl/host/web/connection.js) against a socket stand-in: answers
// by id, the agent's requests and notifications apart, the stream's cursor kept, and a
// resume that the host refuses said so.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Connection, KEY_PROTOCOL, PAGE_PROTOCOL } from "../../acpctl/host/web/connection.js";

class StandInSocket {
  static made = [];

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.sent = [];
    StandInSocket.made.push(this);
    queueMicrotask(() => this.onopen());
  }

  send(text) {
    this.sent.push(JSON.parse(text));
  }

  hear(message) {
    this.onmessage({ data: JSON.stringify(message) });
  }
}

globalThis.WebSocket = StandInSocket;

test("requests are answered by id, and the agent's messages go to their handlers", async () => {
  const connection = new Connection("ws://host/acp");
  await connection.open();
  const socket = StandInSocket.made.at(-1);
  assert.deepEqual(socket.protocols, [PAGE_PROTOCOL]); // no key stored here (no IndexedDB)
  assert.ok(KEY_PROTOCOL.startsWith("acpctl."));
  const asked = [];
  const told = [];
  connection.onRequest = (message) => asked.push(message.method);
  connection.onNotification = (message) => told.push(message.method);
  const first = connection.request("a", {});
  const second = connection.request("b", {});
  const [one, two] = socket.sent;
  socket.hear({ jsonrpc: "2.0", id: two.id, error: { code: 1, message: "no b" } });
  socket.hear({ jsonrpc: "2.0", id: one.id, result: { ok: 1 } });
  assert.deepEqual(await first, { ok: 1 });
  await assert.rejects(second, /no b/);
  socket.hear({ jsonrpc: "2.0", id: 9, method: "session/request_permission", params: {} });
  socket.hear({ jsonrpc: "2.0", method: "session/update", params: {} });
  assert.deepEqual(asked, ["session/request_permission"]);
  assert.deepEqual(told, ["session/update"]);
});

test("the cursor of the last message is kept, and a resume sends it", async () => {
  const connection = new Connection("ws://host/acp");
  await connection.open();
  const socket = StandInSocket.made.at(-1);
  connection.connectionId = "c1";
  socket.hear({ jsonrpc: "2.0", method: "x", params: { _meta: { "acp/cursor": "41" } } });
  socket.hear({ jsonrpc: "2.0", method: "y", params: { _meta: { "acp/cursor": "42" } } });
  assert.equal(connection.cursor, "42");
  const resuming = connection.resume();
  await new Promise((resolve) => setTimeout(resolve, 0));
  const again = StandInSocket.made.at(-1);
  assert.notEqual(again, socket);
  const [resume] = again.sent;
  assert.deepEqual(resume.params, { connectionId: "c1", cursor: "42" });
  again.hear({ jsonrpc: "2.0", id: resume.id, error: { code: -32002, message: "gone" } });
  assert.equal(await resuming, false); // the host no longer holds it
});

test("a connection given up on fails what is in flight", async () => {
  const connection = new Connection("ws://host/acp");
  await connection.open();
  const waiting = connection.request("slow", {});
  connection.abandon();
  await assert.rejects(waiting, /disconnected/);
});

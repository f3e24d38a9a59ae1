// One ACP connection to the host, over WebSocket: to /acp (the default agent) or
// /acp/NAME. Requests are answered by id; the agent's requests go to `onRequest`. The
// device's cookie (HttpOnly, set at pairing) goes with it by itself; its key (device-
// key.js) is offered as a subprotocol, since a browser's socket can set no header.
import { deviceKey } from "./device-key.js";

export const CLIENT_INFO = { name: "acpctl page", version: "1" };
export const PAGE_PROTOCOL = "acpctl.page";
export const KEY_PROTOCOL = "acpctl.key.";

export function socketAddress(location, path) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}${path}`;
}

export class Connection {
  constructor(url) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.onRequest = () => {};
    this.onNotification = () => {};
    this.onClose = () => {};
    // Where the stream stands, to resume it on a new socket after a drop (the host's
    // resumable delivery): the connection's id, and the last message's cursor.
    this.connectionId = null;
    this.role = null; // as the host says at initialize
    this.device = null; // the paired device it is, as the host says at initialize
    this.cursor = null;
    this.gone = false; // given up on (its resume refused): its socket's end means nothing
  }

  async open() {
    const key = await deviceKey().catch(() => null);
    const protocols = key ? [PAGE_PROTOCOL, `${KEY_PROTOCOL}${key}`] : [PAGE_PROTOCOL];
    this.socket = new WebSocket(this.url, protocols);
    this.socket.onmessage = (event) => this.received(JSON.parse(event.data));
    this.socket.onclose = () => this.onClose();
    return new Promise((resolve, reject) => {
      this.socket.onopen = resolve;
      this.socket.onerror = () => reject(new Error("the host refused the connection"));
    });
  }

  // The requests in flight fail: the connection is gone for good.
  abandon() {
    for (const { reject } of this.pending.values()) reject(new Error("disconnected"));
    this.pending.clear();
  }

  // The same connection on a new socket: what followed the last cursor comes first, then
  // what is live, and the requests in flight get their answers. False: the host no longer
  // holds it (past its grace time); nothing was delivered then.
  async resume() {
    if (!this.connectionId || !this.cursor) return false;
    try {
      await this.open();
    } catch (error) {
      return false;
    }
    const id = this.nextId++;
    const resumed = new Promise((resolve) => {
      this.pending.set(id, { resolve: () => resolve(true), reject: () => resolve(false) });
    });
    this.send({
      jsonrpc: "2.0",
      id,
      method: "stream/resume",
      params: { connectionId: this.connectionId, cursor: this.cursor },
    });
    return resumed;
  }

  received(message) {
    const carrier = message.params || message.result || message;
    const cursor = carrier && carrier._meta && carrier._meta["acp/cursor"];
    if (cursor) this.cursor = cursor;
    if (message.method === "stream/resume_failed") return;
    if ("method" in message && "id" in message) {
      this.onRequest(message);
    } else if ("method" in message) {
      this.onNotification(message);
    } else {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if ("error" in message) waiting.reject(new Error(message.error.message));
      else waiting.resolve(message.result);
    }
  }

  send(message) {
    this.socket.send(JSON.stringify(message));
  }

  request(method, params) {
    const id = this.nextId++;
    this.send({ jsonrpc: "2.0", id, method, params });
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  notify(method, params) {
    this.send({ jsonrpc: "2.0", method, params });
  }

  respond(id, result) {
    this.send({ jsonrpc: "2.0", id, result });
  }

  refuse(id, message) {
    this.send({ jsonrpc: "2.0", id, error: { code: -32601, message } });
  }

  async initialize() {
    const answer = await this.request("initialize", {
      protocolVersion: 1,
      clientInfo: CLIENT_INFO,
      // It answers an elicitation's form and shows its address; it reads no file and
      // runs no terminal (an editor does). A replay brings who answered what; the host
      // tells when what waits, or the sessions, change.
      clientCapabilities: {
        elicitation: { form: {}, url: {} },
        _meta: { "acpctl/recorded": true, "acpctl/changes": true },
      },
    });
    const meta = answer._meta || {};
    this.connectionId = meta["acpctl/connectionId"] || null;
    this.role = meta["acpctl/role"] || "controller";
    this.device = meta["acpctl/device"] || null;
    return answer;
  }
}

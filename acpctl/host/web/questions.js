// The agent's questions this device is asked: each agent's connection joins the sessions
// with a question waiting, so that the host asks this device too; an answer goes back on
// the connection that was asked.
import { CLIENT_INFO, Connection, socketAddress } from "./connection.js";
import { ELICITATION, PERMISSION } from "./forms.js";
import { page } from "./state.js";

const CANCEL_REQUEST = "$/cancel_request";

// An agent's connection: this host's, or a linked host's through this one (`host`).
export function agentAddress(agent, host) {
  const at = host ? `/acp/@${encodeURIComponent(host)}` : "/acp";
  return socketAddress(window.location, `${at}/${encodeURIComponent(agent)}`);
}

// A connection's handler of the agent's requests: questions are kept and shown; anything
// else (a file read, a terminal) is an editor's, and refused.
export function askedHere(connection) {
  return (request) => {
    const session = request.params && request.params.sessionId;
    if ((request.method === PERMISSION || request.method === ELICITATION) && session) {
      page.asked.set(session, { connection, request, at: Date.now() / 1000 });
      page.render();
    } else {
      connection.refuse(request.id, "the page answers the agent's questions only");
    }
  };
}

// A question answered elsewhere, or no longer wanted: its buttons go.
export function withdrawnBy(message) {
  if (message.method !== CANCEL_REQUEST) return false;
  for (const [session, asked] of page.asked) {
    if (asked.request.id === message.params.requestId) page.asked.delete(session);
  }
  page.render();
  return true;
}

export async function agentConnection(agent, host) {
  const key = host ? `${host}/${agent}` : agent;
  let known = page.agents.get(key);
  if (known) return known;
  const connection = new Connection(agentAddress(agent, host));
  known = { connection, joined: new Set() };
  page.agents.set(key, known);
  connection.onRequest = askedHere(connection);
  connection.onNotification = withdrawnBy;
  connection.onClose = () => {
    connection.abandon();
    page.agents.delete(key);
  };
  await connection.open();
  await connection.initialize();
  return known;
}

// A session with a question waiting is joined, so that this device is asked it too.
export async function join(entry) {
  const known = await agentConnection(entry.agent);
  if (known.joined.has(entry.sessionId)) return;
  known.joined.add(entry.sessionId);
  const attached = await known.connection.request("session/attach", {
    sessionId: entry.sessionId,
    historyPolicy: "none",
    clientInfo: CLIENT_INFO,
  });
  page.role.set(entry.sessionId, attached.role);
}

// The person's answer to the session's question; `then` is told of it (the session view
// shows it in its transcript).
export function answer(session, result, then = () => {}) {
  const asked = page.asked.get(session);
  if (!asked) return;
  page.asked.delete(session);
  asked.connection.respond(asked.request.id, result);
  then(result);
  page.render();
}

// The host's page: what waits for a person, across agents and sessions, answered here;
// the sessions live at the host. It speaks ACP to its own host over WebSocket; the
// device's cookie (HttpOnly, set at pairing) is its credential, so this script never
// holds one. Everything an agent wrote is put on the page as text (textContent), never
// as markup.
"use strict";

const REFRESH_MS = 2000;
const PERMISSION = "session/request_permission";
const ELICITATION = "elicitation/create";
const CANCEL_REQUEST = "$/cancel_request";
const CLIENT_INFO = { name: "acpctl page", version: "1" };

function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = String(text);
  return made;
}

// One ACP connection to the host, over WebSocket: to /acp (the default agent) or
// /acp/NAME. Requests are answered by id; the agent's requests go to `onRequest`.
class Connection {
  constructor(path) {
    this.path = path;
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
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    // The device's key beside its cookie (device-key.js), as a subprotocol: a browser's
    // socket can set no header. The host picks "acpctl.page".
    const key = await deviceKey().catch(() => null);
    const protocols = key ? ["acpctl.page", `acpctl.key.${key}`] : ["acpctl.page"];
    this.socket = new WebSocket(`${scheme}://${window.location.host}${this.path}`, protocols);
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
    this.socket.send(
      JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "stream/resume",
        params: { connectionId: this.connectionId, cursor: this.cursor },
      }),
    );
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

  request(method, params) {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  respond(id, result) {
    this.socket.send(JSON.stringify({ jsonrpc: "2.0", id, result }));
  }

  async initialize() {
    const answer = await this.request("initialize", {
      protocolVersion: 1,
      clientInfo: CLIENT_INFO,
      // It answers an elicitation's form and shows its address; it reads no file and
      // runs no terminal (an editor does). A replay brings it who answered what.
      clientCapabilities: {
        elicitation: { form: {}, url: {} },
        // A replay brings who answered what; the host tells when what waits changes.
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

// The page's state: the host's answers, and each agent's connection with the sessions
// it has joined to answer their questions.
const page = {
  main: null,
  agents: new Map(), // agent name -> { connection, joined: Set of session ids }
  asked: new Map(), // session id -> the agent's request this device was asked
  role: new Map(), // session id -> this device's role there
};

function say(text) {
  document.getElementById("link").textContent = text;
}

function askedHere(connection) {
  return (request) => {
    const session = request.params && request.params.sessionId;
    if ((request.method === PERMISSION || request.method === ELICITATION) && session) {
      page.asked.set(session, { connection, request });
      render();
      refresh(); // its card comes with the list: asked now, not at the next look
    } else {
      connection.socket.send(
        JSON.stringify({
          jsonrpc: "2.0",
          id: request.id,
          error: { code: -32601, message: "the page answers the agent's questions only" },
        }),
      );
    }
  };
}

function withdrawn(message) {
  for (const [session, asked] of page.asked) {
    if (asked.request.id === message.params.requestId) page.asked.delete(session);
  }
  refresh();
}

async function agentConnection(agent) {
  let known = page.agents.get(agent);
  if (known) return known;
  const connection = new Connection(`/acp/${encodeURIComponent(agent)}`);
  known = { connection, joined: new Set() };
  page.agents.set(agent, known);
  connection.onRequest = askedHere(connection);
  connection.onNotification = (message) => {
    if (message.method === CANCEL_REQUEST) withdrawn(message);
  };
  connection.onClose = () => {
    connection.abandon();
    page.agents.delete(agent);
  };
  await connection.open();
  await connection.initialize();
  return known;
}

// A session with a question waiting is joined, so that this device is asked it too.
async function join(entry) {
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

function answer(session, result) {
  const asked = page.asked.get(session);
  if (!asked) return;
  page.asked.delete(session);
  asked.connection.respond(asked.request.id, result);
  if (view.entry && view.entry.sessionId === session) {
    const outcome = result.outcome || {};
    shownAnswered(outcome.optionId || outcome.outcome || result.action, { name: "you" });
  }
  render();
  setTimeout(refresh, 300);
}

// How the person answers what the agent asked: the permission's options, or the question.
function answering(session, request) {
  return request.method === PERMISSION
    ? choices(session, request.params.options)
    : question(session, request.params);
}

function choices(session, options) {
  const box = element("div", "choices");
  for (const option of options || []) {
    const kind = String(option.kind || "");
    const style = kind.startsWith("allow") ? "allow" : kind.startsWith("reject") ? "reject" : "";
    const button = element("button", style, option.name);
    button.type = "button";
    button.addEventListener("click", () =>
      answer(session, { outcome: { outcome: "selected", optionId: option.optionId } }),
    );
    box.append(button);
  }
  return box;
}

// An elicitation: a form of the agent's schema (the browser checks types, lengths,
// ranges and patterns before it is sent), or an address to open.
function question(session, params) {
  const form = element("form", "question");
  form.noValidate = false;
  const fields = [];
  if (params.mode === "url") {
    form.append(element("div", "where", "The agent asks you to open this address:"));
    form.append(element("div", "asked", params.url));
  } else {
    const schema = params.requestedSchema || {};
    const required = new Set(schema.required || []);
    for (const [name, field] of Object.entries(schema.properties || {})) {
      const label = element("label", "field", field.title || name);
      const input = fieldInput(field);
      input.name = name;
      input.required = required.has(name) && field.type !== "boolean";
      label.append(input);
      form.append(label);
      fields.push([name, field, input]);
    }
  }
  const buttons = element("div", "choices");
  const accept = element("button", "allow", params.mode === "url" ? "I opened it" : "Send");
  accept.type = "submit";
  const decline = element("button", "reject", "Decline");
  decline.type = "button";
  decline.addEventListener("click", () => answer(session, { action: "decline" }));
  buttons.append(accept, decline);
  form.append(buttons);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    const content = {};
    for (const [name, field, input] of fields) {
      const value = fieldValue(field, input);
      if (value !== undefined) content[name] = value;
    }
    answer(session, params.mode === "url" ? { action: "accept" } : { action: "accept", content });
  });
  return form;
}

function fieldInput(field) {
  const values = field.enum || (field.items && field.items.enum);
  const titled = field.oneOf || (field.items && (field.items.oneOf || field.items.anyOf));
  if (values || titled) {
    const select = element("select");
    select.multiple = field.type === "array";
    for (const choice of titled || values.map((value) => ({ const: value, title: value }))) {
      const option = element("option", "", choice.title || choice.const);
      option.value = choice.const;
      select.append(option);
    }
    return select;
  }
  const input = element("input");
  if (field.type === "boolean") {
    input.type = "checkbox";
    input.checked = field.default === true;
    return input;
  }
  const number = field.type === "number" || field.type === "integer";
  input.type = number ? "number" : "text";
  if (field.type === "integer") input.step = "1";
  if (field.type === "number") input.step = "any";
  if (typeof field.minimum === "number") input.min = String(field.minimum);
  if (typeof field.maximum === "number") input.max = String(field.maximum);
  if (typeof field.minLength === "number") input.minLength = field.minLength;
  if (typeof field.maxLength === "number") input.maxLength = field.maxLength;
  if (typeof field.pattern === "string") input.pattern = field.pattern;
  if (field.default !== undefined && field.default !== null) input.value = String(field.default);
  return input;
}

function fieldValue(field, input) {
  if (field.type === "boolean") return input.checked;
  if (field.type === "array") return [...input.selectedOptions].map((option) => option.value);
  if (input.value === "") return undefined;
  if (field.type === "integer") return Number.parseInt(input.value, 10);
  if (field.type === "number") return Number(input.value);
  return input.value;
}

let latest = { waiting: [], sessions: [] };

function age(stamp) {
  const seconds = Math.max(0, (Date.now() - Date.parse(stamp)) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return "now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

// What a permission would let the agent do: the command it runs, the diff it makes.
function wanted(tool) {
  const box = element("div", "tool-wanted");
  const input = tool.rawInput || {};
  const command = Array.isArray(input.command) ? input.command.join(" ") : input.command;
  if (typeof command === "string") box.append(element("pre", "", visible(command)));
  for (const content of tool.content || []) {
    if (content.type !== "diff") continue;
    const pre = element("pre");
    pre.append(element("div", "where", visible(content.path)));
    for (const [style, line] of diffLines(content.oldText, content.newText)) {
      pre.append(element("div", style, line));
    }
    box.append(pre);
  }
  return box;
}

// The browser's notifications, while the page is open (its tab in the background, say):
// one for each question that comes to wait after the page has first shown the list.
const told = new Set();
let listed = false;

function notify(entries) {
  const fresh = entries.filter((entry) => !told.has(`${entry.sessionId} ${entry.waitingSince}`));
  for (const entry of fresh) told.add(`${entry.sessionId} ${entry.waitingSince}`);
  const allowed = "Notification" in window && Notification.permission === "granted";
  if (listed && allowed) {
    for (const entry of fresh) {
      new Notification(`${entry.agent} asks`, { body: entry.asked, tag: entry.sessionId });
    }
  }
  listed = true;
}

function offerNotifications() {
  const button = document.getElementById("notify");
  const can = "Notification" in window && Notification.permission === "default";
  button.hidden = !can;
  button.onclick = async () => {
    await Notification.requestPermission();
    offerNotifications();
  };
}

function render() {
  const waiting = document.getElementById("waiting");
  waiting.replaceChildren();
  for (const entry of latest.waiting) {
    const card = element("li");
    card.append(element("div", "where", `${entry.agent} · ${entry.title || entry.sessionId}`));
    card.append(element("div", "where", entry.cwd));
    card.append(element("div", "asked", visible(entry.asked)));
    const asked = page.asked.get(entry.sessionId);
    if (asked && asked.request.method === PERMISSION) {
      card.append(wanted(asked.request.params.toolCall || {}));
    }
    if (asked) {
      card.append(answering(entry.sessionId, asked.request));
    } else if (page.role.get(entry.sessionId) === "observer") {
      card.append(element("div", "muted", "This device watches only: it cannot answer."));
    }
    waiting.append(card);
  }
  document.getElementById("nothing-waits").hidden = latest.waiting.length > 0;
  renderAskedInView();
  const sessions = document.getElementById("sessions");
  sessions.replaceChildren();
  for (const entry of latest.sessions) {
    const card = element("li", "open");
    card.addEventListener("click", () => openSession(entry));
    const title = element("div", "", entry.title || entry.sessionId);
    // A recent session no agent holds: opening it opens it again at its agent.
    const state = entry.live ? entry.state : "recent";
    title.append(element("span", `state ${state}`, state));
    card.append(title);
    card.append(element("div", "where", `${entry.agent} · ${entry.cwd} · ${age(entry.updatedAt)}`));
    if (entry.notRespondingSince) {
      const since = new Date(entry.notRespondingSince * 1000).toLocaleTimeString();
      card.append(element("div", "problem", `the agent is not responding since ${since}`));
    }
    sessions.append(card);
  }
  document.getElementById("no-sessions").hidden = latest.sessions.length > 0;
}

// == a session's transcript, live ===========================================================
//
// Opened on a connection of its own to the session's agent, joined with its whole history
// (session/attach): the replay, then what happens. Dropped (a phone asleep), it is opened
// again and the transcript made anew from the history: nothing lost, nothing twice.

const markdown = window.markdownit({ html: false, linkify: false });
// An image in the agent's Markdown becomes a link to it: the page fetches nothing an
// agent names (and the policy would refuse it anyway).
markdown.renderer.rules.image = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const source = markdown.utils.escapeHtml(token.attrGet("src") || "");
  const alt = self.renderInlineAsText(token.children || [], options, env) || source;
  return `<a href="${source}">${markdown.utils.escapeHtml(alt)}</a>`;
};

function rendered(text) {
  // Raw HTML in the agent's Markdown is escaped by the renderer (html: false), and what
  // it makes is cleaned by DOMPurify all the same; links open apart, without a referrer.
  const holder = element("div", "agent");
  holder.innerHTML = window.DOMPurify.sanitize(markdown.render(text));
  for (const link of holder.querySelectorAll("a")) {
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  return holder;
}

function diffLines(oldText, newText) {
  const a = (oldText || "").split("\n");
  const b = (newText || "").split("\n");
  if (a.length * b.length > 250000) {
    return [...a.map((line) => ["del", `-${line}`]), ...b.map((line) => ["add", `+${line}`])];
  }
  const common = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] =
        a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      lines.push(["", ` ${a[i]}`]);
      i++;
      j++;
    } else if (j < b.length && (i === a.length || common[i][j + 1] > common[i + 1][j])) {
      lines.push(["add", `+${b[j++]}`]);
    } else {
      lines.push(["del", `-${a[i++]}`]);
    }
  }
  return lines;
}

const view = {
  entry: null,
  connection: null,
  last: null,
  tools: new Map(),
  leaving: false,
  replays: 0, // the transcript made from the history
  resumes: 0, // the connection resumed by its cursor after a drop
};

function transcriptItem(className) {
  const item = element("li", className);
  document.getElementById("transcript").append(item);
  return item;
}

function toolBody(tool, update) {
  const body = tool.querySelector(".body");
  for (const content of update.content || []) {
    if (content.type === "diff") {
      const pre = element("pre");
      pre.append(element("div", "where", content.path));
      for (const [style, line] of diffLines(content.oldText, content.newText)) {
        pre.append(element("div", style, line));
      }
      body.append(pre);
    } else if (content.type === "content" && content.content && content.content.type === "text") {
      body.append(element("pre", "", content.content.text));
    }
  }
}

function shown(update) {
  const kind = update.sessionUpdate;
  const text = update.content && update.content.type === "text" ? update.content.text : "";
  if (kind === "user_message_chunk") {
    if (view.last && view.last.kind === kind) view.last.item.textContent += `\n${text}`;
    else view.last = { kind, item: transcriptItem("you") };
    if (!view.last.item.textContent) view.last.item.textContent = text;
  } else if (kind === "agent_message_chunk") {
    const same = view.last && view.last.kind === kind && view.last.id === update.messageId;
    if (!same) view.last = { kind, id: update.messageId, text: "", item: transcriptItem("") };
    view.last.text += text;
    view.last.item.replaceChildren(rendered(view.last.text));
  } else if (kind === "agent_thought_chunk") {
    if (!view.last || view.last.kind !== kind) {
      const item = transcriptItem("");
      const folded = element("details", "thought");
      folded.append(element("summary", "", "Thinking"), element("div", "", ""));
      item.append(folded);
      view.last = { kind, item: folded.lastChild };
    }
    view.last.item.textContent += text;
  } else if (kind === "tool_call" || kind === "tool_call_update") {
    view.last = null;
    let tool = view.tools.get(update.toolCallId);
    if (!tool) {
      tool = element("details", "tool");
      tool.open = true;
      tool.append(element("summary"), element("div", "body"));
      view.tools.set(update.toolCallId, tool);
      transcriptItem("").append(tool);
    }
    if (update.title) tool.dataset.title = update.title;
    if (update.status) tool.dataset.status = update.status;
    tool.querySelector("summary").textContent =
      `${tool.dataset.title || "tool call"} · ${tool.dataset.status || "pending"}`;
    toolBody(tool, update);
  } else if (kind === "plan") {
    view.last = null;
    const list = element("ul");
    for (const entry of update.entries || []) {
      list.append(element("li", "", `${entry.status === "completed" ? "✓" : "○"} ${entry.content}`));
    }
    transcriptItem("").append(element("div", "where", "Plan"), list);
  }
}

function who(by) {
  if (!by) return "";
  return by.device ? `, by ${by.device} (a paired device)` : by.name ? `, by ${by.name}` : "";
}

// The history's questions and answers, in their place (a replay's _acpctl/recorded).
function recorded(event) {
  view.last = null;
  if (event.type === "permission") {
    const tool = event.toolCall || {};
    transcriptItem("ended").textContent = `? permission asked: ${tool.title || "a tool call"}`;
  } else if (event.type === "elicitation") {
    transcriptItem("ended").textContent = `? the agent asks: ${event.message || ""}`;
  } else if (event.type === "permission_outcome") {
    const outcome = event.outcome || {};
    transcriptItem("ended").textContent =
      `answered: ${outcome.optionId || outcome.outcome}${who(event.resolvedBy)}`;
  } else if (event.type === "elicitation_outcome") {
    transcriptItem("ended").textContent = `answered: ${event.action}${who(event.resolvedBy)}`;
  }
}

// An answer to the viewed session's question: another client's (who, from the host), or
// this device's own (`by` you).
function shownAnswered(answer, by) {
  view.last = null;
  transcriptItem("ended").textContent = `answered: ${answer}${who(by)}`;
}

// A session's address is the page's, with the agent and session in the fragment (what
// a notice's link opens: docs/web.md), so a reload or a shared link comes back to it.
function sessionFromAddress() {
  const wanted = new URLSearchParams(window.location.hash.slice(1));
  const agent = wanted.get("agent");
  const sessionId = wanted.get("session");
  if (!agent || !sessionId) return null;
  const listed = latest.sessions.find((s) => s.agent === agent && s.sessionId === sessionId);
  return listed || { agent, sessionId, cwd: "", title: null };
}

async function openSession(entry) {
  const address = new URLSearchParams({ agent: entry.agent, session: entry.sessionId });
  history.replaceState(null, "", `#${address}`);
  view.entry = entry;
  view.leaving = false;
  document.getElementById("overview").hidden = true;
  document.getElementById("session-view").hidden = false;
  document.getElementById("session-title").textContent = entry.title || entry.sessionId;
  document.getElementById("session-where").textContent = `${entry.agent} · ${entry.cwd}`;
  await joinView();
}

async function joinView() {
  const entry = view.entry;
  document.getElementById("transcript").replaceChildren();
  view.last = null;
  view.tools = new Map();
  const connection = new Connection(`/acp/${encodeURIComponent(entry.agent)}`);
  view.connection = connection;
  connection.onRequest = askedHere(connection);
  connection.onNotification = (message) => {
    if (message.method === CANCEL_REQUEST) withdrawn(message);
    const params = message.params || {};
    if (message.method === "_acpctl/recorded" && params.sessionId === entry.sessionId) {
      recorded(params.event || {});
    }
    if (message.method === "_acpctl/elicitation_resolved" && params.sessionId === entry.sessionId) {
      shownAnswered(params.action, params.resolvedBy);
    }
    if (message.method === "session/update" && params.sessionId === entry.sessionId) {
      const kind = (params.update || {}).sessionUpdate;
      if (kind === "permission_resolved") {
        shownAnswered(params.update.chosenOptionId || "cancelled", params.update.resolvedBy);
      }
      const update = params.update || {};
      if (update.sessionUpdate === "current_mode_update" && view.modes) {
        view.modes.currentModeId = update.currentModeId;
        renderSettings(page.role.get(entry.sessionId) === "observer");
      } else if (update.sessionUpdate === "config_option_update") {
        view.options = update.configOptions || [];
        renderSettings(page.role.get(entry.sessionId) === "observer");
      }
      shown(update);
    }
  };
  connection.onClose = () => {
    if (connection.gone) return; // given up on: a fresh connection has the view
    if (view.leaving || view.entry !== entry) return connection.abandon();
    // Dropped (the phone slept): resumed by its cursor, nothing lost, nothing twice; else,
    // once the host has let it go, made anew from the history.
    connection.resume().then((resumed) => {
      if (resumed) {
        view.resumes += 1;
      } else {
        connection.gone = true;
        connection.abandon();
        setTimeout(joinView, REFRESH_MS);
      }
    });
  };
  view.replays += 1;
  await connection.open();
  await connection.initialize();
  const attached = await connection.request("session/attach", {
    sessionId: entry.sessionId,
    historyPolicy: "full",
    clientInfo: CLIENT_INFO,
  });
  page.role.set(entry.sessionId, attached.role);
  const watching = attached.role === "observer";
  view.modes = attached.modes || null;
  view.options = attached.configOptions || [];
  renderSettings(watching);
  document.getElementById("prompt-form").hidden = watching;
  document.getElementById("watch-only").hidden = !watching;
}

// The session's mode and its select options, as the agent offers them; a change is asked
// of the agent, and shown once the agent has taken it.
function renderSettings(watching) {
  const bar = document.getElementById("settings");
  bar.replaceChildren();
  const pickers = [];
  // ACP: an agent's config option of the "mode" category takes the place of its modes.
  const modeOption = view.options.some((option) => option.category === "mode");
  if (!modeOption && view.modes && (view.modes.availableModes || []).length) {
    const choices = view.modes.availableModes.map((mode) => [mode.id, mode.name || mode.id]);
    pickers.push(["Mode", "mode", choices, view.modes.currentModeId, async (value) => {
      await view.connection.request("session/set_mode", {
        sessionId: view.entry.sessionId,
        modeId: value,
      });
      view.modes.currentModeId = value;
    }]);
  }
  for (const option of view.options) {
    if (option.type !== "select") continue;
    const flat = (option.options || []).flatMap((item) => item.options || [item]);
    pickers.push([option.name || option.id, option.id, flat.map((o) => [o.value, o.name || o.value]),
      option.currentValue, async (value) => {
        const answer = await view.connection.request("session/set_config_option", {
          sessionId: view.entry.sessionId,
          configId: option.id,
          value,
        });
        if (answer && answer.configOptions) view.options = answer.configOptions;
      }]);
  }
  for (const [title, id, choices, current, set] of pickers) {
    const label = element("label", "", title);
    const select = element("select");
    select.name = id;
    select.disabled = watching;
    for (const [value, name] of choices) {
      const option = element("option", "", name);
      option.value = value;
      option.selected = value === current;
      select.append(option);
    }
    select.addEventListener("change", () => set(select.value).catch((error) => {
      transcriptItem("ended").textContent = `not changed: ${error.message}`;
      renderSettings(watching); // as the agent still has it
    }));
    label.append(select);
    bar.append(label);
  }
}

function leaveSession() {
  history.replaceState(null, "", window.location.pathname);
  view.leaving = true;
  view.entry = null;
  if (view.connection) view.connection.socket.close();
  view.connection = null;
  document.getElementById("session-view").hidden = true;
  document.getElementById("overview").hidden = false;
  refresh();
  showDevices().catch(() => {});
}

async function sendPrompt(event) {
  event.preventDefault();
  const box = document.getElementById("prompt");
  const text = box.value.trim();
  if (!text || !view.connection) return;
  box.value = "";
  shown({ sessionUpdate: "user_message_chunk", content: { type: "text", text } });
  view.last = null;
  const sessionId = view.entry.sessionId;
  try {
    const answer = await view.connection.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    transcriptItem("ended").textContent = `turn ended: ${answer.stopReason}`;
  } catch (error) {
    transcriptItem("ended").textContent = `the prompt failed: ${error.message}`;
  }
  view.last = null;
}

function cancelTurn() {
  if (!view.connection) return;
  view.connection.socket.send(
    JSON.stringify({
      jsonrpc: "2.0",
      method: "session/cancel",
      params: { sessionId: view.entry.sessionId },
    }),
  );
}

// The viewed session's question, if this device is asked one, below its transcript.
function renderAskedInView() {
  const old = document.getElementById("view-asked");
  if (old) old.remove();
  const asked = view.entry && page.asked.get(view.entry.sessionId);
  if (!asked) return;
  const holder = element("div", "tool");
  holder.id = "view-asked";
  const params = asked.request.params;
  const tool = params.toolCall || {};
  holder.append(
    element("div", "asked", visible(params.message || tool.title || "The agent asks")),
  );
  holder.append(answering(view.entry.sessionId, asked.request));
  document.getElementById("transcript").after(holder);
}

async function refresh() {
  if (!page.main) return;
  try {
    const [waiting, sessions] = await Promise.all([
      page.main.request("_acpctl/waiting", {}),
      page.main.request("_acpctl/sessions", {}),
    ]);
    latest = { waiting: waiting.waiting, sessions: sessions.sessions };
    notify(latest.waiting);
    for (const entry of latest.waiting) join(entry).catch(() => {});
    render();
  } catch (error) {
    say(`(${error.message})`);
  }
}

// The paired devices, this one marked; pairing and revoking are the host's terminal's.
async function showDevices() {
  const known = await page.main.request("_acpctl/devices", {});
  const list = document.getElementById("devices");
  list.replaceChildren(...known.devices.map((device) => {
    const card = element("li");
    const title = element("div", "", device.name);
    if (device.name === page.main.device) title.append(element("span", "state idle", "this device"));
    card.append(title);
    const seen = device.lastSeen ? `seen ${age(new Date(device.lastSeen * 1000).toISOString())}` : "";
    card.append(element("div", "where", [device.role, seen].filter(Boolean).join(" · ")));
    return card;
  }));
}

// A new session: an agent, in a project the history knows.
async function offerNewSession() {
  const known = await page.main.request("_acpctl/projects", {});
  const form = document.getElementById("new-session");
  for (const [id, values] of [["new-agent", known.agents], ["new-project", known.projects]]) {
    const select = document.getElementById(id);
    select.replaceChildren(...values.map((value) => {
      const option = element("option", "", value);
      option.value = value;
      return option;
    }));
  }
  // An observer device starts nothing (the host would refuse it).
  form.hidden = known.projects.length === 0 || page.main.role === "observer";
}

async function newSession(event) {
  event.preventDefault();
  const agent = document.getElementById("new-agent").value;
  const cwd = document.getElementById("new-project").value;
  try {
    const known = await agentConnection(agent);
    const made = await known.connection.request("session/new", { cwd, mcpServers: [] });
    await openSession({ agent, sessionId: made.sessionId, cwd, title: null });
  } catch (error) {
    say(`(no new session: ${error.message})`);
  }
}

let unreachableSince = null; // when the host stopped answering, while it does not

// Whether the host answers at all (any HTTP answer): a refused socket from a host that
// answers is this device's credential, not the network.
async function reachable() {
  try {
    await fetch("/assets/visible.js", { method: "HEAD", cache: "no-store" });
    return true;
  } catch (error) {
    return false;
  }
}

// What a device no longer paired must not keep showing: the lists, and a session's view.
function forget() {
  latest = { waiting: [], sessions: [] };
  if (view.entry) leaveSession();
  render();
}

async function start() {
  const main = new Connection("/acp");
  try {
    await main.open();
    await main.initialize();
  } catch (error) {
    // Refused (a device never paired, or revoked), or the host is away: told apart by
    // whether the host answers at all, said, and tried again now and then.
    if (await reachable()) {
      unreachableSince = null;
      forget();
      say("this device is not paired, or was revoked: pair it again (acpctl serve --pair)");
    } else {
      unreachableSince = unreachableSince || new Date();
      say(`the host is not reachable (retrying since ${unreachableSince.toLocaleTimeString()})`);
    }
    setTimeout(start, 5 * REFRESH_MS);
    return;
  }
  unreachableSince = null;
  // A question asked or settled anywhere on the host: the lists at once.
  main.onNotification = (message) => {
    if (message.method === "_acpctl/waiting_changed") refresh();
  };
  main.onClose = () => {
    main.abandon();
    page.main = null;
    say("disconnected: reconnecting…");
    setTimeout(start, REFRESH_MS);
  };
  page.main = main;
  say("");
  await refresh();
  await offerNewSession().catch(() => {});
  await showDevices().catch(() => {});
  const addressed = view.entry ? null : sessionFromAddress();
  if (addressed) {
    openSession(addressed).catch((error) => {
      leaveSession();
      say(`(not opened: ${error.message})`);
    });
  }
}

offerNotifications();
document.getElementById("back").addEventListener("click", leaveSession);
document.getElementById("prompt-form").addEventListener("submit", sendPrompt);
document.getElementById("cancel").addEventListener("click", cancelTurn);
document.getElementById("new-session").addEventListener("submit", newSession);
start();
setInterval(refresh, REFRESH_MS);

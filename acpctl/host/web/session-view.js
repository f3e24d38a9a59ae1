// A session's transcript, live. Opened on a connection of its own to the session's agent,
// joined with its whole history (session/attach): the replay, then what happens. Dropped
// (a phone asleep), it is resumed by its cursor, or made anew from the history: nothing
// lost, nothing twice.
import { CLIENT_INFO, Connection } from "./connection.js";
import { byId, element } from "./dom.js";
import { answering, diffBlock, PERMISSION, wanted } from "./forms.js";
import { agentAddress, answer, askedHere, withdrawnBy } from "./questions.js";
import { page, view } from "./state.js";
import { addressOf, clock, sessionTitle, who } from "./text.js";
import { visible } from "./visible.js";
import markdownit from "./markdown-it.esm.min.js";

const REJOIN_MS = 2000;
const AT_META = "acpctl/at"; // when a replayed prompt was sent, in epoch seconds

const markdown = markdownit({ html: false, linkify: false });
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
  // A wide table scrolls within itself: reachable by keyboard too.
  for (const table of holder.querySelectorAll("table")) table.tabIndex = 0;
  return holder;
}

function transcriptItem(className) {
  const item = element("li", className);
  byId("transcript").append(item);
  return item;
}

function stamped(item, seconds) {
  const at = clock(seconds);
  if (at) item.prepend(element("time", "at", at));
  return item;
}

function ended(text, seconds = Date.now() / 1000) {
  view.last = null;
  const item = transcriptItem("ended");
  item.textContent = text;
  return stamped(item, seconds);
}

function toolBody(tool, update) {
  const body = tool.querySelector(".body");
  for (const content of update.content || []) {
    if (content.type === "diff") {
      body.append(diffBlock(content));
    } else if (content.type === "content" && content.content && content.content.type === "text") {
      body.append(element("pre", "", content.content.text));
    }
  }
}

function retitle() {
  byId("session-title").textContent = sessionTitle(view.entry, view.firstPrompt);
}

export function shown(update, meta = {}) {
  const kind = update.sessionUpdate;
  const text = update.content && update.content.type === "text" ? update.content.text : "";
  if (kind === "user_message_chunk") {
    if (view.last && view.last.kind === kind) {
      view.last.text.textContent += `\n${text}`;
    } else {
      const item = stamped(transcriptItem("you"), meta[AT_META] || Date.now() / 1000);
      view.last = { kind, item, text: element("span", "said", text) };
      item.append(view.last.text);
    }
    if (view.firstPrompt === null) {
      view.firstPrompt = text;
      retitle();
    }
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
  } else if (kind === "session_info_update" && typeof update.title === "string") {
    view.entry.title = update.title;
    retitle();
  }
}

// The history's questions and answers, in their place (a replay's _acpctl/recorded).
function recorded(event) {
  if (event.type === "permission") {
    const tool = event.toolCall || {};
    ended(`? permission asked: ${tool.title || "a tool call"}`, event.ts);
  } else if (event.type === "elicitation") {
    ended(`? the agent asks: ${event.message || ""}`, event.ts);
  } else if (event.type === "permission_outcome") {
    const outcome = event.outcome || {};
    ended(`answered: ${outcome.optionId || outcome.outcome}${who(event.resolvedBy)}`, event.ts);
  } else if (event.type === "elicitation_outcome") {
    ended(`answered: ${event.action}${who(event.resolvedBy)}`, event.ts);
  }
}

// An answer to the viewed session's question: another client's (who, from the host), or
// this device's own (`by` you).
function shownAnswered(answered, by) {
  ended(`answered: ${answered}${who(by)}`);
}

function answeredHere(result) {
  const outcome = result.outcome || {};
  shownAnswered(outcome.optionId || outcome.outcome || result.action, { name: "you" });
}

// The session a page address names (a notice's or a notification's link: docs/web.md),
// as the lists know it.
export function listedEntry(named) {
  const { agent, sessionId, host } = named;
  const listed = page.latest.sessions.find(
    (s) => s.agent === agent && s.sessionId === sessionId && s.host === host,
  );
  return listed || { agent, sessionId, host, cwd: "", title: null };
}

export async function openSession(entry) {
  history.replaceState(null, "", addressOf(entry.agent, entry.sessionId, entry.host));
  view.entry = { ...entry };
  view.leaving = false;
  view.firstPrompt = null;
  byId("overview").hidden = true;
  byId("session-view").hidden = false;
  retitle();
  const where = entry.host ? `${entry.host} · ` : "";
  byId("session-where").textContent = `${where}${entry.agent} · ${entry.cwd}`;
  await joinView();
}

function viewNotification(entry, message) {
  if (withdrawnBy(message)) return;
  const params = message.params || {};
  if (params.sessionId !== entry.sessionId) return;
  if (message.method === "_acpctl/recorded") {
    recorded(params.event || {});
  } else if (message.method === "_acpctl/elicitation_resolved") {
    shownAnswered(params.action, params.resolvedBy);
  } else if (message.method === "session/update") {
    const update = params.update || {};
    if (update.sessionUpdate === "permission_resolved") {
      shownAnswered(update.chosenOptionId || "cancelled", update.resolvedBy);
    } else if (update.sessionUpdate === "current_mode_update" && view.modes) {
      view.modes.currentModeId = update.currentModeId;
      renderSettings(page.role.get(entry.sessionId) === "observer");
    } else if (update.sessionUpdate === "config_option_update") {
      view.options = update.configOptions || [];
      renderSettings(page.role.get(entry.sessionId) === "observer");
    }
    shown(update, params._meta || {});
  }
}

async function joinView() {
  const entry = view.entry;
  byId("transcript").replaceChildren();
  view.last = null;
  view.tools = new Map();
  const connection = new Connection(agentAddress(entry.agent, entry.host));
  view.connection = connection;
  connection.onRequest = askedHere(connection);
  connection.onNotification = (message) => viewNotification(entry, message);
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
        setTimeout(joinView, REJOIN_MS);
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
  byId("prompt-form").hidden = watching;
  byId("watch-only").hidden = !watching;
}

// The session's mode and its select options, as the agent offers them; a change is asked
// of the agent, and shown once the agent has taken it.
function renderSettings(watching) {
  const bar = byId("settings");
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
    const choices = flat.map((o) => [o.value, o.name || o.value]);
    pickers.push([option.name || option.id, option.id, choices, option.currentValue,
      async (value) => {
        const changed = await view.connection.request("session/set_config_option", {
          sessionId: view.entry.sessionId,
          configId: option.id,
          value,
        });
        if (changed && changed.configOptions) view.options = changed.configOptions;
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
    select.addEventListener("change", () =>
      set(select.value).catch((error) => {
        ended(`not changed: ${error.message}`);
        renderSettings(watching); // as the agent still has it
      }),
    );
    label.append(select);
    bar.append(label);
  }
}

export function leaveSession() {
  history.replaceState(null, "", window.location.pathname);
  view.leaving = true;
  view.entry = null;
  if (view.connection) view.connection.socket.close();
  view.connection = null;
  byId("session-view").hidden = true;
  byId("overview").hidden = false;
}

export async function sendPrompt() {
  const box = byId("prompt");
  const text = box.value.trim();
  if (!text || !view.connection) return;
  box.value = "";
  shown({ sessionUpdate: "user_message_chunk", content: { type: "text", text } });
  view.last = null;
  try {
    const answered = await view.connection.request("session/prompt", {
      sessionId: view.entry.sessionId,
      prompt: [{ type: "text", text }],
    });
    ended(`turn ended: ${answered.stopReason}`);
  } catch (error) {
    ended(`the prompt failed: ${error.message}`);
  }
}

export function cancelTurn() {
  if (view.connection) view.connection.notify("session/cancel", { sessionId: view.entry.sessionId });
}

// The viewed session's question, if this device is asked one, below its transcript: what
// it would do, whole, then the answers.
export function renderAskedInView() {
  const old = byId("view-asked");
  if (old) old.remove();
  const asked = view.entry && page.asked.get(view.entry.sessionId);
  if (!asked) return;
  const holder = element("div", "tool");
  holder.id = "view-asked";
  const params = asked.request.params;
  const tool = params.toolCall || {};
  holder.append(element("div", "asked", visible(params.message || tool.title || "The agent asks")));
  if (asked.request.method === PERMISSION) holder.append(wanted(tool));
  const session = view.entry.sessionId;
  holder.append(answering(asked.request, (result) => answer(session, result, answeredHere)));
  byId("transcript").after(holder);
}

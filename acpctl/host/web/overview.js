// The overview: what waits for a person across agents and sessions (answered here), the
// sessions the host holds and the history's recent ones, and the paired devices.
import { byId, element } from "./dom.js";
import { answering, PERMISSION, wanted } from "./forms.js";
import { agentConnection, answer } from "./questions.js";
import { page } from "./state.js";
import { age, sessionTitle, waited } from "./text.js";
import { visible } from "./visible.js";

// What waits: the host's list, and any question this device was asked that the list
// does not have yet (it is shown the moment it is asked).
export function waitingNow() {
  const listed = page.latest.waiting;
  const known = new Set(listed.map((entry) => entry.sessionId));
  const asked = [];
  for (const [sessionId, { request }] of page.asked) {
    if (known.has(sessionId)) continue;
    const params = request.params || {};
    const tool = params.toolCall || {};
    const session = page.latest.sessions.find((s) => s.sessionId === sessionId) || {};
    asked.push({
      sessionId,
      agent: session.agent || "",
      title: session.title || null,
      cwd: session.cwd || "",
      asked: params.message || tool.title || "The agent asks",
      waitingSince: Date.now() / 1000,
    });
  }
  return [...listed, ...asked];
}

export function renderWaiting() {
  const waiting = byId("waiting");
  const entries = waitingNow();
  waiting.replaceChildren();
  for (const entry of entries) {
    const card = element("li");
    card.dataset.session = entry.sessionId;
    const head = element("div", "where", `${entry.agent} · ${sessionTitle(entry)}`);
    head.append(element("span", "waited", ` · ${waited(entry.waitingSince)}`));
    card.append(head);
    card.append(element("div", "where", entry.cwd));
    card.append(element("div", "asked", visible(entry.asked)));
    const asked = page.asked.get(entry.sessionId);
    if (asked && asked.request.method === PERMISSION) {
      card.append(wanted(asked.request.params.toolCall || {}));
    }
    if (asked) {
      card.append(answering(asked.request, (result) => answer(entry.sessionId, result)));
    } else if (page.role.get(entry.sessionId) === "observer") {
      card.append(element("div", "muted", "This device watches only: it cannot answer."));
    }
    waiting.append(card);
  }
  byId("nothing-waits").hidden = entries.length > 0;
}

// The waiting cards' ages, kept current between changes.
export function tickWaited() {
  const entries = waitingNow();
  for (const card of byId("waiting").children) {
    const entry = entries.find((e) => e.sessionId === card.dataset.session);
    const shown = card.querySelector(".waited");
    if (entry && shown) shown.textContent = ` · ${waited(entry.waitingSince)}`;
  }
}

export function renderSessions(open) {
  const sessions = byId("sessions");
  sessions.replaceChildren();
  for (const entry of page.latest.sessions) {
    // The whole card opens it; its button is what a keyboard or a screen reader reaches
    // (its click comes to the card).
    const card = element("li", "session");
    card.dataset.session = entry.sessionId;
    card.addEventListener("click", () => open(entry));
    const opener = element("button", "open");
    opener.type = "button";
    const title = element("span", "title", sessionTitle(entry));
    // A recent session no agent holds: opening it opens it again at its agent.
    const state = entry.live ? entry.state : "recent";
    opener.append(title, element("span", `state ${state}`, state));
    card.append(opener);
    card.append(element("div", "where", `${entry.agent} · ${entry.cwd} · ${age(entry.updatedAt)}`));
    if (entry.notRespondingSince) {
      const since = new Date(entry.notRespondingSince * 1000).toLocaleTimeString();
      card.append(element("div", "problem", `the agent is not responding since ${since}`));
    }
    sessions.append(card);
  }
  byId("no-sessions").hidden = page.latest.sessions.length > 0;
}

// The paired devices, this one marked; pairing and revoking are the host's terminal's.
export async function showDevices() {
  const known = await page.main.request("_acpctl/devices", {});
  byId("devices").replaceChildren(
    ...known.devices.map((device) => {
      const card = element("li");
      const title = element("div", "", device.name);
      if (device.name === page.main.device) {
        title.append(element("span", "state idle", "this device"));
      }
      card.append(title);
      const seen = device.lastSeen
        ? `seen ${age(new Date(device.lastSeen * 1000).toISOString())}`
        : "";
      card.append(element("div", "where", [device.role, seen].filter(Boolean).join(" · ")));
      return card;
    }),
  );
}

// A new session: an agent, in a project the history knows.
export async function offerNewSession() {
  const known = await page.main.request("_acpctl/projects", {});
  for (const [id, values] of [
    ["new-agent", known.agents],
    ["new-project", known.projects],
  ]) {
    byId(id).replaceChildren(
      ...values.map((value) => {
        const option = element("option", "", value);
        option.value = value;
        return option;
      }),
    );
  }
  // An observer device starts nothing (the host would refuse it).
  byId("new-session").hidden = known.projects.length === 0 || page.main.role === "observer";
}

export async function newSession(open) {
  const agent = byId("new-agent").value;
  const cwd = byId("new-project").value;
  const known = await agentConnection(agent);
  const made = await known.connection.request("session/new", { cwd, mcpServers: [] });
  await open({ agent, sessionId: made.sessionId, cwd, title: null });
}

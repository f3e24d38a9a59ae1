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
  for (const [sessionId, { request, at }] of page.asked) {
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
      waitingSince: at,
    });
  }
  return [...listed, ...asked];
}

export function renderWaiting() {
  const waiting = byId("waiting");
  const entries = waitingNow();
  // A card whose question has not changed is kept, form and all: a person may be filling
  // it in, which a redraw for another change (a session elsewhere) would empty. Its words
  // are written again.
  const kept = new Map([...waiting.children].map((card) => [card.dataset.key, card]));
  const cards = entries.map((entry) => kept.get(cardKey(entry)) || waitingCard(entry));
  const unchanged =
    cards.length === waiting.children.length && cards.every((c, i) => c === waiting.children[i]);
  if (!unchanged) waiting.replaceChildren(...cards);
  entries.forEach((entry, i) => describe(cards[i], entry));
  byId("nothing-waits").hidden = entries.length > 0;
}

// Which question a card answers: the one this device was asked (its request), else the
// session's waiting since then, as this device may see it.
function cardKey(entry) {
  if (entry.host) return JSON.stringify([entry.host, entry.question]);
  const asked = page.asked.get(entry.sessionId);
  if (asked) return JSON.stringify([entry.sessionId, "asked", asked.request.id]);
  const role = page.role.get(entry.sessionId) || "";
  return JSON.stringify([entry.sessionId, entry.waitingSince, role]);
}

function waitingCard(entry) {
  const card = element("li");
  card.dataset.session = entry.sessionId;
  card.dataset.key = cardKey(entry);
  const head = element("div", "where");
  head.append(element("span", "title"), element("span", "waited"));
  card.append(head, element("div", "where cwd"), element("div", "asked"));
  if (entry.host) {
    card.append(linkedAnswering(entry));
    return card;
  }
  const asked = page.asked.get(entry.sessionId);
  if (asked && asked.request.method === PERMISSION) {
    card.append(wanted(asked.request.params.toolCall || {}));
  }
  if (asked) {
    card.append(answering(asked.request, (result) => answer(entry.sessionId, result)));
  } else if (page.role.get(entry.sessionId) === "observer") {
    card.append(element("div", "muted", "This device watches only: it cannot answer."));
  }
  return card;
}

// A linked host's question (entry.host): its permission's options, answered through this
// host, which forwards the answer there; a question of another kind is answered on that
// host's own page.
function linkedAnswering(entry) {
  if (page.main.role === "observer") {
    return element("div", "muted", "This device watches only: it cannot answer.");
  }
  if (!entry.choices) {
    return element("div", "muted", `Answer it on ${entry.host}'s own page.`);
  }
  const request = { method: PERMISSION, params: { options: entry.choices } };
  const box = answering(request, (result) => {
    for (const button of box.querySelectorAll("button")) button.disabled = true;
    page.main
      .request("_acpctl/answer", {
        host: entry.host,
        question: entry.question,
        optionId: result.outcome.optionId,
      })
      .catch((error) => {
        for (const button of box.querySelectorAll("button")) button.disabled = false;
        box.append(element("div", "problem", error.message));
      });
  });
  return box;
}

// Where a card's or a session's entry is: this host's, or a linked host's ("build · ").
function at(entry) {
  return entry.host ? `${entry.host} · ` : "";
}

function describe(card, entry) {
  card.querySelector(".title").textContent = `${at(entry)}${entry.agent} · ${sessionTitle(entry)}`;
  card.querySelector(".waited").textContent = ` · ${waited(entry.waitingSince)}`;
  card.querySelector(".cwd").textContent = entry.cwd;
  card.querySelector(".asked").textContent = visible(entry.asked);
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
    if (entry.host && entry.sessionId === undefined) {
      sessions.append(unreachable(entry));
      continue;
    }
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
    const where = `${at(entry)}${entry.agent} · ${entry.cwd} · ${age(entry.updatedAt)}`;
    card.append(element("div", "where", where));
    if (entry.notRespondingSince) {
      const since = new Date(entry.notRespondingSince * 1000).toLocaleTimeString();
      card.append(element("div", "problem", `the agent is not responding since ${since}`));
    }
    sessions.append(card);
  }
  byId("no-sessions").hidden = page.latest.sessions.length > 0;
}

// A linked host that does not answer: since when, and why (or that it stopped).
function unreachable(entry) {
  const card = element("li", "session linked");
  const since = entry.unreachableSince
    ? new Date(entry.unreachableSince * 1000).toLocaleTimeString()
    : "now";
  const said = entry.problem === "stopped" ? "stopped" : `unreachable since ${since}`;
  card.append(element("div", "title", `${entry.host}: ${said}`));
  if (entry.problem !== "stopped") card.append(element("div", "where", entry.problem || ""));
  return card;
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

// A new session: an agent, in a project the history knows; on this host, or on a linked
// host (its agents and projects, as it told this host).
export async function offerNewSession() {
  const known = await page.main.request("_acpctl/projects", {});
  const hosts = { "": known, ...(known.linked || {}) };
  const choose = byId("new-host");
  options(choose, Object.keys(hosts), (host) => host || "this host");
  byId("new-host-label").hidden = Object.keys(hosts).length < 2;
  const offer = () => {
    const chosen = hosts[choose.value] || known;
    options(byId("new-agent"), chosen.agents || []);
    options(byId("new-project"), chosen.projects || []);
  };
  choose.onchange = offer;
  offer();
  // An observer device starts nothing (the host would refuse it).
  const any = Object.values(hosts).some((h) => (h.projects || []).length > 0);
  byId("new-session").hidden = !any || page.main.role === "observer";
}

function options(select, values, named = (value) => value) {
  select.replaceChildren(
    ...values.map((value) => {
      const option = element("option", "", named(value));
      option.value = value;
      return option;
    }),
  );
}

export async function newSession(open) {
  const host = byId("new-host").value || undefined;
  const agent = byId("new-agent").value;
  const cwd = byId("new-project").value;
  const known = await agentConnection(agent, host);
  const made = await known.connection.request("session/new", { cwd, mcpServers: [] });
  await open({ agent, sessionId: made.sessionId, cwd, title: null, host });
}

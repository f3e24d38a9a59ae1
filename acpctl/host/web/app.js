// The host's page: what waits for a person, across agents and sessions, answered here; the
// sessions live at the host. It speaks ACP to its own host over WebSocket (connection.js).
// The host tells it when what waits, or the sessions, change; it never polls. The parts:
// overview.js (the lists), session-view.js (a session's transcript), forms.js (answers),
// questions.js (what this device is asked), notifications.js (being told), text.js (what
// is said, with no DOM).
import { Connection, socketAddress } from "./connection.js";
import { byId } from "./dom.js";
import { join } from "./questions.js";
import {
  newSession,
  offerNewSession,
  renderSessions,
  renderWaiting,
  showDevices,
  tickWaited,
  waitingNow,
} from "./overview.js";
import { notifyOpen, offerPush, registerWorker } from "./notifications.js";
import {
  cancelTurn,
  leaveSession,
  listedEntry,
  openSession,
  renderAskedInView,
  sendPrompt,
} from "./session-view.js";
import { page, view } from "./state.js";
import { addressed } from "./text.js";

const RETRY_MS = 2000;
const AWAY_RETRY_MS = 10000; // the longest wait between tries while the host is away
const TICK_MS = 15000; // the waiting cards' ages
let sessionsStale = false; // the sessions changed while the page was hidden: not drawn

function say(text) {
  byId("link").textContent = text;
}

page.render = () => {
  renderWaiting();
  renderAskedInView();
  renderSessions(openSession);
};

// The lists: as the host tells them when they change (_acpctl/waiting_changed,
// _acpctl/sessions_changed carry them), or asked for (at the start).
async function refreshWaiting(told) {
  if (!page.main) return;
  const { waiting } = told || (await page.main.request("_acpctl/waiting", {}));
  page.latest.waiting = waiting;
  notifyOpen(waitingNow()).catch(() => {});
  // This host's sessions are joined to be asked; a linked host's question is answered
  // through this host (_acpctl/answer), never joined here.
  for (const entry of waiting) if (!entry.host) join(entry).catch(() => {});
  page.render();
}

async function refreshSessions(told) {
  if (!page.main) return;
  page.latest.sessions = (told || (await page.main.request("_acpctl/sessions", {}))).sessions;
  // A page nobody looks at (a phone's tab in the background) is drawn when it is looked
  // at again.
  if (document.hidden) sessionsStale = true;
  else page.render();
  // Nothing to start a session in yet (a new host): the first project offers it. A form
  // already offered is left as it is, a person may be choosing in it.
  if (byId("new-session").hidden && page.main.role !== "observer") {
    offerNewSession().catch(() => {});
  }
}

page.refresh = async () => {
  try {
    await Promise.all([refreshWaiting(), refreshSessions()]);
  } catch (error) {
    say(`(${error.message})`);
  }
};

// Whether the host answers at all (any HTTP answer): a refused socket from a host that
// answers is this device's credential, not the network.
async function reachable() {
  try {
    await fetch("/manifest.webmanifest", { method: "HEAD", cache: "no-store" });
    return true;
  } catch (error) {
    return false;
  }
}

// What a device no longer paired must not keep showing: the lists, and a session's view.
function forget() {
  page.latest = { waiting: [], sessions: [] };
  page.asked.clear();
  if (view.entry) leaveSession();
  byId("devices").replaceChildren();
  byId("new-session").hidden = true;
  page.render();
}

let unreachableSince = null; // when the host stopped answering, while it does not
let away = 0; // tries since the host last let this page in

function openAddressed(address) {
  const named = addressed(address.slice(address.indexOf("#")));
  if (!named) return;
  openSession(listedEntry(named)).catch((error) => {
    leaveSession();
    say(`(not opened: ${error.message})`);
  });
}

async function start() {
  const main = new Connection(socketAddress(window.location, "/acp"));
  try {
    await main.open();
    await main.initialize();
  } catch (error) {
    // Refused (a device never paired, or revoked), or the host is away: told apart by
    // whether the host answers at all, said, and tried again now and then.
    if (await reachable()) {
      unreachableSince = null;
      forget();
      say("this device is not paired, or was revoked: pair it again (acpctl host pair)");
    } else {
      unreachableSince = unreachableSince || new Date();
      say(`the host is not reachable (retrying since ${unreachableSince.toLocaleTimeString()})`);
    }
    // A host that restarts is back within seconds: tried again soon, then less often.
    away += 1;
    setTimeout(start, Math.min(RETRY_MS * 2 ** (away - 1), AWAY_RETRY_MS));
    return;
  }
  away = 0;
  unreachableSince = null;
  main.onNotification = (message) => {
    const told = message.params && (message.params.waiting || message.params.sessions);
    if (message.method === "_acpctl/waiting_changed") {
      refreshWaiting(told ? message.params : undefined).catch(() => {});
    } else if (message.method === "_acpctl/sessions_changed") {
      refreshSessions(told ? message.params : undefined).catch(() => {});
    }
  };
  main.onClose = () => {
    main.abandon();
    page.main = null;
    say("disconnected: reconnecting…");
    setTimeout(start, RETRY_MS);
  };
  page.main = main;
  const paired = new URLSearchParams(window.location.hash.slice(1)).get("paired");
  if (paired) history.replaceState(null, "", window.location.pathname);
  say(paired ? `paired as “${main.device || paired}”` : "");
  await page.refresh();
  await offerNewSession().catch(() => {});
  await showDevices().catch(() => {});
  await offerPush(main).catch(() => {});
  if (!view.entry) openAddressed(window.location.hash);
}

registerWorker(openAddressed);
byId("back").addEventListener("click", () => {
  leaveSession();
  page.refresh();
  showDevices().catch(() => {});
  // The history (and the linked hosts') may know new projects since the page opened.
  offerNewSession().catch(() => {});
});
byId("prompt-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sendPrompt();
});
byId("cancel").addEventListener("click", cancelTurn);
byId("new-session").addEventListener("submit", (event) => {
  event.preventDefault();
  newSession(openSession).catch((error) => say(`(no new session: ${error.message})`));
});
document.addEventListener("visibilitychange", () => {
  if (document.hidden || !sessionsStale) return;
  sessionsStale = false;
  page.render();
});
setInterval(tickWaited, TICK_MS);
start();

// What the page says of what it shows, with no DOM: ages and times, diffs, who answered,
// the command a permission would run, the address of a session. Tested by node
// (tests/web/).

export function age(stamp, now = Date.now()) {
  const seconds = Math.max(0, (now - Date.parse(stamp)) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return "now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

// How long a question has waited, from its epoch seconds: "waiting 3 min".
export function waited(since, now = Date.now()) {
  const seconds = Math.max(0, now / 1000 - Number(since));
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `waiting ${Math.floor(seconds)} s`;
  if (seconds < 3600) return `waiting ${Math.floor(seconds / 60)} min`;
  return `waiting ${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

// The time of day of epoch seconds, as the transcript shows it.
export function clock(seconds) {
  const when = new Date(Number(seconds) * 1000);
  return Number.isNaN(when.getTime())
    ? ""
    : when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export function diffLines(oldText, newText) {
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

// The command a permission's tool call would run, whole, or null.
export function commandOf(tool) {
  const input = (tool && tool.rawInput) || {};
  const command = Array.isArray(input.command) ? input.command.join(" ") : input.command;
  return typeof command === "string" ? command : null;
}

// ", by WHO" of an answer's resolvedBy (and how it came: from a notification, through a
// linked host's page).
export function who(by) {
  if (!by) return "";
  const named = by.device ? `, by ${by.device} (a paired device)` : by.name ? `, by ${by.name}` : "";
  const how = by.via === "notification" && named ? `${named}, from a notification` : named;
  return by.through && how ? `${how}, through ${by.through}` : how;
}

// An option that stays granted after this question ("allow_always", "reject_always").
export function isStanding(option) {
  return String((option && option.kind) || "").endsWith("_always");
}

// A session's title: the agent's, else its first prompt's start, else that it is new.
export function sessionTitle(entry, firstPrompt) {
  if (entry && entry.title) return entry.title;
  const said = String(firstPrompt || "").trim().split("\n")[0];
  if (said) return said.length > 80 ? `${said.slice(0, 79)}…` : said;
  return "New session";
}

// The session a page address names in its fragment (#agent=A&session=S), or null.
// A session's address on the page (its fragment): its agent, its id, and the linked host
// it is on (none: this host).
export function addressed(hash) {
  const wanted = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  const agent = wanted.get("agent");
  const sessionId = wanted.get("session");
  const host = wanted.get("host");
  if (!agent || !sessionId) return null;
  return host ? { agent, sessionId, host } : { agent, sessionId };
}

export function addressOf(agent, sessionId, host) {
  const named = host ? { agent, session: sessionId, host } : { agent, session: sessionId };
  return `#${new URLSearchParams(named)}`;
}

// A pushed question as the service worker shows it: the agent, the project and what is
// asked; tapped, it opens the page at the session; its buttons are the one-time answers
// the host sent (never a standing one: those are chosen on the page).
export function notificationOf(question) {
  const title = question.title || `Something waits in ${question.agent || "an agent"}`;
  return [
    title,
    {
      body: question.body || "Open the page to answer.",
      tag: question.tag || question.question || "acpctl",
      renotify: true,
      requireInteraction: true,
      timestamp: question.waitingSince ? question.waitingSince * 1000 : Date.now(),
      icon: "/assets/icon-192.png",
      actions: (question.actions || []).slice(0, 2),
      data: { question: question.question, url: question.url || "/", tag: question.tag },
    },
  ];
}

// A VAPID public key (base64url) as pushManager.subscribe() takes it.
export function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

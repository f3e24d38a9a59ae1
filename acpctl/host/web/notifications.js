// Being told something waits: the browser's notifications. With the service worker (sw.js)
// subscribed to Web Push, the host pushes a waiting question to this device even while no
// page is open; while the page is open, a new question is shown at once too (same tag: the
// host's push replaces it, never doubles it).
import { byId } from "./dom.js";
import { keyBytes, notificationOf } from "./text.js";

let worker = null; // the service worker's registration, once registered
// The registration under way: the offer to be told waits for it, since the host may answer
// before the browser has registered the worker (a loaded machine, a slow phone).
let registering = Promise.resolve(null);

export function registerWorker(open) {
  registering = register(open);
  return registering;
}

async function register(open) {
  if (!("serviceWorker" in navigator)) return null;
  try {
    worker = await navigator.serviceWorker.register("/sw.js", { scope: "/", type: "module" });
  } catch (error) {
    return null;
  }
  // A tapped notification asks the open page to show the session.
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && event.data.open) open(event.data.open);
  });
  return worker;
}

const told = new Set();
let listed = false;

// One notification for each question that comes to wait after the page first listed them.
export async function notifyOpen(entries) {
  const fresh = entries.filter((entry) => !told.has(`${entry.sessionId} ${entry.waitingSince}`));
  for (const entry of fresh) told.add(`${entry.sessionId} ${entry.waitingSince}`);
  const allowed = "Notification" in window && Notification.permission === "granted";
  const first = !listed;
  listed = true;
  if (first || !allowed) return;
  for (const entry of fresh) {
    const [title, options] = notificationOf({
      title: `${entry.agent} asks`,
      body: entry.asked,
      tag: entry.sessionId,
      agent: entry.agent,
      waitingSince: entry.waitingSince,
    });
    if (worker) await worker.showNotification(title, { ...options, requireInteraction: false });
    else new Notification(title, { body: options.body, tag: options.tag });
  }
}

function said(text) {
  byId("notify-state").textContent = text;
}

// The offer to be told: subscribe this device to pushes, or stop them. A controller
// device's only (an observer answers nothing), where the browser can push.
export async function offerPush(main) {
  const bar = byId("notify-bar");
  const button = byId("notify");
  await registering;
  const canPush = worker && "PushManager" in window && "Notification" in window;
  if (!main.device || main.role === "observer") {
    bar.hidden = true;
    return;
  }
  bar.hidden = false;
  if (!canPush) {
    button.hidden = true;
    said(
      "This browser cannot be told when the page is closed. On an iPhone: Share, Add to " +
        "Home Screen, then open acpctl from there.",
    );
    return;
  }
  const { publicKey, subscribed } = await main.request("_acpctl/push_key", {});
  button.textContent = subscribed ? "Stop telling me" : "Tell me when something waits";
  said(subscribed ? "This device is told when something waits, page closed or not." : "");
  // Shown once it does something: a tap before the host has answered went nowhere.
  button.hidden = false;
  button.onclick = async () => {
    button.disabled = true;
    try {
      if (subscribed) {
        const existing = await worker.pushManager.getSubscription();
        if (existing) await existing.unsubscribe().catch(() => {});
        await main.request("_acpctl/push_subscribe", { subscription: null });
      } else if ((await Notification.requestPermission()) === "granted") {
        const subscription = await worker.pushManager.subscribe({
          userVisibleOnly: true,
          applicationServerKey: keyBytes(publicKey),
        });
        await main.request("_acpctl/push_subscribe", { subscription: subscription.toJSON() });
      } else {
        said("Notifications are blocked for this page: allow them in the browser's settings.");
        return;
      }
      await offerPush(main);
    } catch (error) {
      said(`Not changed: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  };
}

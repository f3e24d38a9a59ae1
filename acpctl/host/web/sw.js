// The page's service worker (served at /sw.js: its scope is the whole page). It shows the
// host's Web Push notifications (acpctl/host/push.py) while no page is open, and answers
// from them: a tap on a one-time answer goes to the host by an idempotent request with the
// device's two secrets (its cookie, and its key from IndexedDB); a tap on the notification
// opens the page at the session.
import { DEVICE_KEY_HEADER, deviceKey } from "/assets/device-key.js";
import { notificationOf } from "/assets/text.js";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

async function hostRequest(path, body) {
  const key = await deviceKey().catch(() => null);
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    cache: "no-store",
    headers: { "Content-Type": "application/json", [DEVICE_KEY_HEADER]: key || "" },
    body: JSON.stringify(body),
  });
  const said = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, said };
}

// A push with no agent text ([serve] push_agent_text = false) names the question only:
// the rest comes from the host, over this device's authenticated request.
async function showPushed(data) {
  let question = data;
  if (!data.title && data.question) {
    const asked = await hostRequest("/push/question", { question: data.question }).catch(
      () => ({ ok: false }),
    );
    if (asked.ok) question = asked.said;
  }
  await self.registration.showNotification(...notificationOf(question));
}

self.addEventListener("push", (event) => {
  event.waitUntil(showPushed(event.data ? event.data.json() : {}));
});

async function openPage(url) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const page of windows) {
    page.postMessage({ open: url });
    if ("focus" in page) return page.focus();
  }
  return self.clients.openWindow(url);
}

async function clicked(notification, action) {
  const data = notification.data || {};
  notification.close();
  if (action && data.question) {
    const answered = await hostRequest("/push/answer", { question: data.question, optionId: action });
    if (answered.ok) return;
    if (answered.status === 409) {
      await self.registration.showNotification("Already answered", {
        body: answered.said.error || "This question no longer waits.",
        tag: data.tag,
      });
      return;
    }
  }
  await openPage(data.url || "/");
}

self.addEventListener("notificationclick", (event) => {
  const done = clicked(event.notification, event.action);
  // A browser's own event keeps the worker alive until the answer is sent; one built by a
  // script cannot (waitUntil throws), and the answer is sent all the same.
  try {
    event.waitUntil(done);
  } catch (error) {
    done.catch(() => {});
  }
});

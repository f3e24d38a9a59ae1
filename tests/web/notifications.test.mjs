// The offer to be told (acpctl/host/web/notifications.js), on a stand-in browser: what the
// page shows must not depend on whether the host answered before the worker registered.
import assert from "node:assert/strict";
import { test } from "node:test";

const elements = {};
for (const id of ["notify-bar", "notify", "notify-state"]) {
  elements[id] = { hidden: true, textContent: "", disabled: false };
}
let registered;
globalThis.document = { getElementById: (id) => elements[id] };
globalThis.window = { PushManager: class {}, Notification: class {} };
Object.defineProperty(globalThis, "navigator", {
  value: {
    serviceWorker: {
      register: () => new Promise((resolve) => (registered = resolve)),
      addEventListener: () => {},
    },
  },
});

const { offerPush, registerWorker } = await import("../../acpctl/host/web/notifications.js");

test("the offer made before the worker has registered waits for it, and is shown", async () => {
  const main = {
    device: "phone",
    role: "controller",
    request: async (method) => {
      assert.equal(method, "_acpctl/push_key");
      return { publicKey: "AAAA", subscribed: false };
    },
  };
  registerWorker(() => {});
  const offered = offerPush(main);
  registered({ pushManager: {} });
  await offered;
  assert.equal(elements["notify-bar"].hidden, false);
  assert.equal(elements.notify.hidden, false);
  assert.equal(elements.notify.textContent, "Tell me when something waits");
});

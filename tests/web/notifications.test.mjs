// The offer to be told (acpctl/host/web/notifications.js), on a stand-in browser: what the
// page shows must not depend on whether the host answered before the worker registered.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

// Each element as the page's HTML has it at first: hidden or not.
const html = readFileSync(new URL("../../acpctl/host/web/index.html", import.meta.url), "utf8");
const elements = {};
for (const id of ["notify-bar", "notify", "notify-state"]) {
  const tag = html.match(new RegExp(`<[a-z]+ id="${id}"[^>]*>`))[0];
  elements[id] = { hidden: /\shidden[\s>]/.test(tag), textContent: "", disabled: false };
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
  let answer;
  const main = {
    device: "phone",
    role: "controller",
    request: (method) => {
      assert.equal(method, "_acpctl/push_key");
      return new Promise((resolve) => (answer = resolve));
    },
  };
  registerWorker(() => {});
  const offered = offerPush(main);
  registered({ pushManager: {} });
  while (answer === undefined) await new Promise((resolve) => setImmediate(resolve));
  // The host has not answered: the button is not offered yet (a tap would go nowhere).
  assert.equal(elements.notify.hidden, true);
  answer({ publicKey: "AAAA", subscribed: false });
  await offered;
  assert.equal(elements["notify-bar"].hidden, false);
  assert.equal(elements.notify.hidden, false);
  assert.equal(typeof elements.notify.onclick, "function");
  assert.equal(elements.notify.textContent, "Tell me when something waits");
});

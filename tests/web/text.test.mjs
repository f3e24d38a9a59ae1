// The page's parts with no DOM (acpctl/host/web/text.js), by node's own test runner.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  addressed,
  addressOf,
  age,
  commandOf,
  diffLines,
  isStanding,
  keyBytes,
  notificationOf,
  sessionTitle,
  waited,
  who,
} from "../../acpctl/host/web/text.js";

test("an age says how long ago, in the largest whole unit", () => {
  const now = Date.parse("2026-12-05T12:00:00Z");
  assert.equal(age("2026-12-05T11:59:30Z", now), "now");
  assert.equal(age("2026-12-05T11:55:00Z", now), "5 min ago");
  assert.equal(age("2026-12-05T09:00:00Z", now), "3 h ago");
  assert.equal(age("2026-12-01T12:00:00Z", now), "4 d ago");
  assert.equal(age("not a time", now), "");
});

test("a waiting card says how long its question has waited", () => {
  const now = 1_000_000 * 1000;
  assert.equal(waited(1_000_000 - 12, now), "waiting 12 s");
  assert.equal(waited(1_000_000 - 185, now), "waiting 3 min");
  assert.equal(waited(1_000_000 - 3 * 3600 - 120, now), "waiting 3 h 2 min");
});

test("a diff keeps the common lines and marks the changed", () => {
  assert.deepEqual(diffLines("a\nb\nc", "a\nB\nc"), [
    ["", " a"],
    ["del", "-b"],
    ["add", "+B"],
    ["", " c"],
  ]);
  assert.deepEqual(diffLines(undefined, "new"), [
    ["del", "-"],
    ["add", "+new"],
  ]);
});

test("the command a permission would run is whole, from a string or an argv", () => {
  const long = "rm -rf build/ dist/ && python -m pytest && git push --force origin main";
  assert.equal(commandOf({ rawInput: { command: long } }), long);
  assert.equal(commandOf({ rawInput: { command: ["git", "push", "--force"] } }), "git push --force");
  assert.equal(commandOf({ rawInput: { path: "/x" } }), null);
  assert.equal(commandOf(undefined), null);
});

test("who answered names a paired device, and a notification's answer says so", () => {
  assert.equal(who({ name: "zed" }), ", by zed");
  assert.equal(who({ name: "acpctl page", device: "phone" }), ", by phone (a paired device)");
  assert.equal(
    who({ device: "phone", via: "notification" }),
    ", by phone (a paired device), from a notification",
  );
  assert.equal(
    who({ device: "phone", via: "link", through: "desk" }),
    ", by phone (a paired device), through desk",
  );
  assert.equal(who({ name: "a client", through: "desk" }), ", by a client, through desk");
  assert.equal(who(null), "");
});

test("an always option is a standing permission; a once option is not", () => {
  assert.ok(isStanding({ kind: "allow_always" }));
  assert.ok(isStanding({ kind: "reject_always" }));
  assert.ok(!isStanding({ kind: "allow_once" }));
  assert.ok(!isStanding({}));
});

test("a new session is titled by its first prompt until the agent names it", () => {
  assert.equal(sessionTitle({ title: null }, null), "New session");
  assert.equal(sessionTitle({ title: null }, "fix the build\nand more"), "fix the build");
  assert.equal(sessionTitle({ title: "Agent's name" }, "fix the build"), "Agent's name");
  assert.equal(sessionTitle({}, "x".repeat(200)).length, 80);
});

test("a session's address goes into the fragment and comes back out", () => {
  const address = addressOf("my agent", "s/1&2");
  assert.deepEqual(addressed(address), { agent: "my agent", sessionId: "s/1&2" });
  assert.equal(addressed("#agent=a"), null);
  const linked = addressOf("demo", "s-1", "build");
  assert.deepEqual(addressed(linked), { agent: "demo", sessionId: "s-1", host: "build" });
  assert.equal(addressed(""), null);
});

test("a pushed question becomes a notification with its one-time answers", () => {
  const [title, options] = notificationOf({
    question: "q1",
    agent: "demo",
    tag: "s1",
    title: "demo asks in app",
    body: "Run rm -rf build",
    url: "/#agent=demo&session=s1",
    waitingSince: 100,
    actions: [
      { action: "allow", title: "Allow" },
      { action: "reject", title: "Reject" },
      { action: "third", title: "Not shown" },
    ],
  });
  assert.equal(title, "demo asks in app");
  assert.equal(options.body, "Run rm -rf build");
  assert.equal(options.timestamp, 100000);
  assert.deepEqual(
    options.actions.map((a) => a.action),
    ["allow", "reject"],
  );
  assert.deepEqual(options.data, { question: "q1", url: "/#agent=demo&session=s1", tag: "s1" });
});

test("a push that carried no agent text still names the agent", () => {
  const [title, options] = notificationOf({ question: "q1", agent: "demo", tag: "s1" });
  assert.equal(title, "Something waits in demo");
  assert.equal(options.body, "Open the page to answer.");
  assert.deepEqual(options.actions, []);
});

test("a VAPID key in base64url becomes its bytes", () => {
  const bytes = keyBytes("BAEC_-8");
  assert.deepEqual([...bytes], [4, 1, 2, 255, 239]);
});

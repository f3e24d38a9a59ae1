// An answer's form values as the agent's schema types them (acpctl/host/web/forms.js).
import assert from "node:assert/strict";
import { test } from "node:test";
import { fieldValue } from "../../acpctl/host/web/forms.js";

test("a field's value is typed by its schema, and an empty optional one is left out", () => {
  assert.equal(fieldValue({ type: "boolean" }, { checked: true }), true);
  assert.equal(fieldValue({ type: "integer" }, { value: "42" }), 42);
  assert.equal(fieldValue({ type: "number" }, { value: "2.5" }), 2.5);
  assert.equal(fieldValue({ type: "string" }, { value: "" }), undefined);
  assert.equal(fieldValue({ type: "string" }, { value: "x" }), "x");
  const selected = { selectedOptions: [{ value: "a" }, { value: "c" }] };
  assert.deepEqual(fieldValue({ type: "array" }, selected), ["a", "c"]);
});

// How a person answers what the agent asks: a permission's options as buttons, an
// elicitation as a form of the agent's schema (the browser checks types, lengths, ranges
// and patterns before it is sent) or an address to open; and what a permission would let
// the agent do, whole, above the buttons.
import { element } from "./dom.js";
import { commandOf, diffLines, isStanding } from "./text.js";
import { visible } from "./visible.js";

export const PERMISSION = "session/request_permission";
export const ELICITATION = "elicitation/create";

export function answering(request, answer) {
  return request.method === PERMISSION
    ? choices(request.params.options, answer)
    : question(request.params, answer);
}

function choices(options, answer) {
  const box = element("div", "choices");
  for (const option of options || []) {
    const kind = String(option.kind || "");
    const style = kind.startsWith("allow") ? "allow" : kind.startsWith("reject") ? "reject" : "";
    const button = element("button", style, option.name);
    button.type = "button";
    if (isStanding(option)) {
      // "Always": it stays granted for later questions too, so it says so.
      button.append(element("span", "standing", "standing permission"));
    }
    button.addEventListener("click", () =>
      answer({ outcome: { outcome: "selected", optionId: option.optionId } }),
    );
    box.append(button);
  }
  return box;
}

function question(params, answer) {
  const form = element("form", "question");
  const fields = [];
  if (params.mode === "url") {
    form.append(element("div", "where", "The agent asks you to open this address:"));
    form.append(element("div", "asked", visible(params.url)));
  } else {
    const schema = params.requestedSchema || {};
    const required = new Set(schema.required || []);
    for (const [name, field] of Object.entries(schema.properties || {})) {
      const label = element("label", "field", field.title || name);
      const input = fieldInput(field);
      input.name = name;
      input.required = required.has(name) && field.type !== "boolean";
      label.append(input);
      form.append(label);
      fields.push([name, field, input]);
    }
  }
  const buttons = element("div", "choices");
  const accept = element("button", "allow", params.mode === "url" ? "I opened it" : "Send");
  accept.type = "submit";
  const decline = element("button", "reject", "Decline");
  decline.type = "button";
  decline.addEventListener("click", () => answer({ action: "decline" }));
  buttons.append(accept, decline);
  form.append(buttons);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    const content = {};
    for (const [name, field, input] of fields) {
      const value = fieldValue(field, input);
      if (value !== undefined) content[name] = value;
    }
    answer(params.mode === "url" ? { action: "accept" } : { action: "accept", content });
  });
  return form;
}

function fieldInput(field) {
  const values = field.enum || (field.items && field.items.enum);
  const titled = field.oneOf || (field.items && (field.items.oneOf || field.items.anyOf));
  if (values || titled) {
    const select = element("select");
    select.multiple = field.type === "array";
    for (const choice of titled || values.map((value) => ({ const: value, title: value }))) {
      const option = element("option", "", choice.title || choice.const);
      option.value = choice.const;
      select.append(option);
    }
    return select;
  }
  const input = element("input");
  if (field.type === "boolean") {
    input.type = "checkbox";
    input.checked = field.default === true;
    return input;
  }
  const number = field.type === "number" || field.type === "integer";
  input.type = number ? "number" : "text";
  if (field.type === "integer") input.step = "1";
  if (field.type === "number") input.step = "any";
  if (typeof field.minimum === "number") input.min = String(field.minimum);
  if (typeof field.maximum === "number") input.max = String(field.maximum);
  if (typeof field.minLength === "number") input.minLength = field.minLength;
  if (typeof field.maxLength === "number") input.maxLength = field.maxLength;
  if (typeof field.pattern === "string") input.pattern = field.pattern;
  if (field.default !== undefined && field.default !== null) input.value = String(field.default);
  return input;
}

// A field's value as the schema types it (an input's `checked`, `value`, or the options
// selected); undefined for an empty optional field.
export function fieldValue(field, input) {
  if (field.type === "boolean") return input.checked;
  if (field.type === "array") return [...input.selectedOptions].map((option) => option.value);
  if (input.value === "") return undefined;
  if (field.type === "integer") return Number.parseInt(input.value, 10);
  if (field.type === "number") return Number(input.value);
  return input.value;
}

// What a permission would let the agent do: the command it runs, whole and wrapped, and
// the diff it makes.
export function wanted(tool) {
  const box = element("div", "tool-wanted");
  const command = commandOf(tool);
  if (command !== null) box.append(element("pre", "command", visible(command)));
  for (const content of tool.content || []) {
    if (content.type !== "diff") continue;
    box.append(diffBlock(content));
  }
  return box;
}

export function diffBlock(content) {
  const pre = element("pre");
  pre.append(element("div", "where", visible(content.path)));
  for (const [style, line] of diffLines(content.oldText, content.newText)) {
    pre.append(element("div", style, line));
  }
  return pre;
}

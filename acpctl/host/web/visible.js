// What a person approves is shown as it will run: a control character, or one that turns
// or hides text (bidi overrides and isolates, zero-width marks), is written as ⟨U+202E⟩,
// so that a command cannot read as something other than what runs. Line breaks and tabs
// stay.
const UNSEEN =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

export function visible(text) {
  return String(text).replace(
    UNSEEN,
    (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`,
  );
}

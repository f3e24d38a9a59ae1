// Pairing: the one-time code is in the address's fragment, which no browser sends to a
// server or a proxy. It is taken out of the address at once (it must not stay in the
// history), and exchanged for the device's two secrets: its credential, which the host
// sets as an HttpOnly cookie (this script never sees it), and its key, which this origin
// keeps in IndexedDB (device-key.js). Paired, the page opens by itself.
import { saveDeviceKey } from "./device-key.js";

function say(text, ok) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = ok ? "ok" : "problem";
  document.getElementById("next").hidden = !ok;
}

async function pair() {
  const code = decodeURIComponent(window.location.hash.slice(1));
  window.history.replaceState(null, "", window.location.pathname);
  if (!code) {
    say("This address has no pairing code. Run acpctl host pair for a new one.", false);
    return;
  }
  let answer;
  try {
    answer = await fetch("/pair", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code }),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (error) {
    say(`The session host did not answer: ${error.message}`, false);
    return;
  }
  const body = await answer.json().catch(() => ({}));
  if (!answer.ok) {
    say(body.error || `The session host refused: ${answer.status}`, false);
    return;
  }
  try {
    await saveDeviceKey(body.key);
  } catch (error) {
    say(`This browser would not keep the device's key (${error}): pair again.`, false);
    return;
  }
  say(`Paired as “${body.name}” (${body.role}).`, true);
  // The page itself, which says again that this device was just paired.
  window.location.replace(`/#${new URLSearchParams({ paired: body.name })}`);
}

pair();

// The device's key (acpctl/host/devices.py): kept in this origin's IndexedDB, which a
// browser keeps for this origin alone (a cookie goes to every port of the host), and which
// the service worker reads too. It goes with every connection and every request, beside
// the cookie: a server on another port of this machine that took the cookie has no key.
const KEY_STORE = "device";

function keyDatabase() {
  return new Promise((resolve, reject) => {
    const opening = indexedDB.open("acpctl", 1);
    opening.onupgradeneeded = () => opening.result.createObjectStore(KEY_STORE);
    opening.onsuccess = () => resolve(opening.result);
    opening.onerror = () => reject(opening.error);
  });
}

async function keyTransaction(mode, act) {
  const database = await keyDatabase();
  try {
    return await new Promise((resolve, reject) => {
      const transaction = database.transaction(KEY_STORE, mode);
      const request = act(transaction.objectStore(KEY_STORE));
      transaction.oncomplete = () => resolve(request.result);
      transaction.onerror = () => reject(transaction.error);
    });
  } finally {
    database.close();
  }
}

export function saveDeviceKey(key) {
  return keyTransaction("readwrite", (store) => store.put(key, "key"));
}

export function deviceKey() {
  return keyTransaction("readonly", (store) => store.get("key"));
}

// The header an HTTP request carries the key in (acp.DEVICE_KEY_HEADER).
export const DEVICE_KEY_HEADER = "Acpctl-Device-Key";

// The page's one way to make an element: what an agent wrote goes in as text
// (textContent), never as markup.
export function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = String(text);
  return made;
}

export function byId(id) {
  return document.getElementById(id);
}

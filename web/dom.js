// Building the page: every stored string reaches the document as a text node (h() never parses HTML), so a
// memory that contains "<script>" shows as those characters.

// h("tag.class", {attr: value, onclick: fn}, ...children): children are nodes, strings (as text), numbers,
// arrays of those, or null/false (skipped).
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function fmt(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

export function percent(part, whole) {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : "0%";
}

export function when(ms) {
  if (!ms) return "";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// The text of a message in kosong's JSON (content a string or a list of parts), for display.
export function messageText(message) {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => {
    if (part?.type === "text") return part.text ?? "";
    if (part?.type === "think") return `[thinking] ${part.think ?? ""}`;
    if (part?.type) return `[${part.type}]`;
    return "";
  }).join("\n");
}

// Tool calls of an assistant message as "name(arguments)" lines.
export function toolCalls(message) {
  return (message?.tool_calls ?? []).map((call) => {
    const fn = call?.function ?? {};
    return `${fn.name ?? "?"}(${typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? "")})`;
  });
}

// A text of at most `n` characters, with an ellipsis when cut.
export function cut(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// A labelled <select> whose options are [value, label] pairs.
export function select(id, label, options, value, onchange) {
  const el = h("select", { id, onchange: (e) => onchange(e.target.value) },
               options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
  return [h("label", { for: id }, label), el];
}

// A form of labelled text fields, one per address parameter ({name, id, label, value, placeholder, type,
// grow}); submitting it calls onSubmit({name: trimmed value}).
export function fieldsForm(fields, submitLabel, onSubmit, attrs = {}) {
  const inputs = fields.map((f) => h("input", { id: f.id, type: f.type ?? "text", value: f.value ?? "", placeholder: f.placeholder }));
  const submit = (e) => {
    e.preventDefault();
    onSubmit(Object.fromEntries(fields.map((f, i) => [f.name, inputs[i].value.trim()])));
  };
  return h("form.controls", { ...attrs, onsubmit: submit },
    fields.map((f, i) => h(`div.field${f.grow ? ".grow" : ""}`, h("label", { for: f.id }, f.label), inputs[i])),
    h("div.field", h("button", { type: "submit" }, submitLabel)));
}

export function errorBox(error) {
  return h("div.error", { role: "alert" },
           h("strong", error.code ? `${error.code}: ` : "error: "), error.message ?? String(error),
           error.requestId ? h("span.muted", ` (request ${error.requestId})`) : null);
}

// Shows `text` for a few seconds in the page's alert region.
export function toast(text) {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove("shown"), 5000);
}

// Asks for confirmation in the page's modal dialog; `extra` is an optional node (an input) shown in it.
// Resolves to true when confirmed.
export function confirmDialog(title, text, okLabel, extra) {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel;
  clear(document.getElementById("confirm-extra"));
  if (extra) document.getElementById("confirm-extra").append(extra);
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

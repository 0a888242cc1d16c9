// The viewer's shell: hash routes (#/page?name=value), the key dialog, and live updates. Each page module
// exports render(main, params, nav) and returns { refresh() } (called when the server reports a change).
import { api, apiKey, readEvents, setApiKey, ApiError } from "./api.js";
import { clear, errorBox, h } from "./dom.js";
import * as contextPage from "./context.js";
import * as timelinePage from "./timeline.js";
import * as storePage from "./store.js";
import * as historyPage from "./history.js";

const pages = { context: contextPage, timeline: timelinePage, store: storePage, history: historyPage };
const main = document.getElementById("main");
let current = null;      // { name, view } of the page shown.
let generation = 0;      // Bumped on every navigation: a slow render of an older route is discarded.

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query = ""] = hash.split("?");
  return { name: pages[name] ? name : "context", params: Object.fromEntries(new URLSearchParams(query)) };
}

// Navigates to `name` with `params` (a new history entry, so Back works); `replace` updates in place.
export function go(name, params = {}, { replace = false } = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const hash = `#/${name}${query.toString() ? `?${query}` : ""}`;
  if (replace) {
    // The page already shows this state (a control changed): only the address follows it.
    history.replaceState(null, "", hash);
    return;
  }
  if (location.hash !== hash) {
    location.hash = hash;  // hashchange renders.
    return;
  }
  route();
}

async function route() {
  const { name, params } = parseHash();
  const mine = ++generation;
  for (const link of document.querySelectorAll("nav a[data-page]")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${document.querySelector(`nav a[data-page="${name}"]`).textContent} · Strata viewer`;
  // Each render fills a container of its own: one overtaken by a newer route writes into a detached node.
  const container = h("div");
  clear(main).append(container);
  main.setAttribute("aria-busy", "true");
  try {
    const view = await pages[name].render(container, params, { go, isCurrent: () => mine === generation });
    if (mine === generation) current = { name, view };
  } catch (error) {
    if (mine !== generation) return;
    clear(container).append(errorBox(error));
    if (error instanceof ApiError && error.status === 401) {
      container.append(h("p", "This server needs a key. ", h("button", { type: "button", onclick: askKey }, "Enter a key")));
    }
  } finally {
    if (mine === generation) main.removeAttribute("aria-busy");
  }
}

function askKey() {
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  input.value = apiKey();
  dialog.returnValue = "";
  dialog.showModal();
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "save") setApiKey(input.value.trim());
    if (dialog.returnValue === "forget") setApiKey("");
    input.value = "";
    if (dialog.returnValue === "save" || dialog.returnValue === "forget") {
      watchChanges();
      route();
    }
  }, { once: true });
}

// Live updates: the server's change stream (api/v1/events) says when the account's data changed; the page
// shown refreshes what it displays. Reconnects after a pause when the stream drops.
let watcher = null;
function watchChanges() {
  watcher?.abort();
  const controller = new AbortController();
  watcher = controller;
  const live = document.getElementById("live");
  // The status line is a live region: it changes only when the state does, so it is not re-announced.
  const state = (text, kind) => {
    if (live.textContent !== text) live.textContent = text;
    if (kind) live.dataset.state = kind;
  };
  let last = null;
  const connect = async () => {
    while (!controller.signal.aborted) {
      try {
        if (live.dataset.state !== "offline") state("connecting…");
        await readEvents("api/v1/events", (event, data) => {
          if (event !== "change") return;
          state("live", "live");
          const revision = JSON.parse(data).revision;
          if (last !== null && revision !== last) refresh();
          last = revision;
        }, controller.signal);
      } catch (error) {
        if (controller.signal.aborted) return;
        state(error instanceof ApiError && error.status === 401 ? "needs a key" : "offline", "offline");
      }
      await new Promise((r) => setTimeout(r, 3000));
    }
  };
  connect();
}

// One refresh at a time; a change announced during one makes another follow it, so none is lost.
let refreshing = false;
let dirty = false;
async function refresh() {
  dirty = true;
  if (refreshing) return;
  refreshing = true;
  try {
    while (dirty && current?.view?.refresh) {
      dirty = false;
      await current.view.refresh();
    }
  } catch (error) {
    main.prepend(errorBox(error));
  } finally {
    refreshing = false;
    dirty = false;
  }
}

document.getElementById("key-button").addEventListener("click", askKey);
// The skip link moves focus; following its href would change the route.
document.querySelector(".skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", route);
watchChanges();
route();

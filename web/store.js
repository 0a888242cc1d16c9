// The store browser: the URI tree by scope (directories open on demand), one node's layers (L0 abstract,
// L1 overview, L2 content), metadata, relations and validity, and a search box showing scored hits with
// the reasons they matched.
import { api } from "./api.js";
import { clear, cut, errorBox, fieldsForm, fmt, h, when } from "./dom.js";

export async function render(main, params, nav) {
  main.append(h("h1", "Store"));
  main.append(fieldsForm([
    { name: "q", id: "find-query", label: "Find", type: "search", value: params.q, placeholder: "what the agent should recall", grow: true },
    { name: "under", id: "find-under", label: "Under", value: params.under, placeholder: "strata://user/alice (optional)" },
  ], "Search", (values) => nav.go("store", { ...params, ...values }), { role: "search" }));

  const results = h("section", { id: "find-results", "aria-label": "Search results" });
  const tree = h("nav.tree", { "aria-label": "Store tree" }, h("h2", "Tree"));
  const detail = h("section.detail", { id: "node-detail", "aria-label": "Selected node" });
  main.append(results, h("div.columns", tree, detail));

  const select = (uri) => nav.go("store", { ...params, uri });

  async function load() {
    const jobs = [loadTree(tree, select)];
    if (params.q) jobs.push(loadFind(results, params.q, params.under, select));
    if (params.uri) jobs.push(loadDetail(detail, params.uri, select));
    else clear(detail).append(h("p.muted", "Choose a node in the tree or among the search results."));
    await Promise.all(jobs);
  }
  await load();
  return { refresh: load };
}

async function loadFind(el, q, under, select) {
  let hits;
  try {
    ({ hits } = await api("POST", "api/v1/search/find", { body: { query: q, under: under || undefined } }));
  } catch (error) {
    clear(el).append(errorBox(error));
    return;
  }
  clear(el).append(h("h2", `Hits for “${q}”`),
    hits.length === 0 ? h("p", "Nothing matched.") : h("ol.hits", { id: "find-hits" }, hits.map((hit) => h("li", { dataset: { uri: hit.uri, score: hit.score } },
      h("button.link", { type: "button", onclick: () => select(hit.uri) }, hit.uri),
      h("span.score", ` score ${Number(hit.score).toFixed(3)}`), h("span.muted", ` L${hit.level} · ${fmt(hit.tokens)} tokens`),
      h("div.reason", "why: ", hit.reason || "—"),
      h("div", cut(hit.abstract ?? "", 300))))));
}

// The tree: each directory a <details> whose children load when it opens (keyboard: Tab to a summary,
// Enter or Space to open it).
async function loadTree(el, select) {
  const open = new Set([...el.querySelectorAll("details[open]")].map((d) => d.dataset.uri));
  const list = await children(undefined, select, open);
  clear(el).append(h("h2", "Tree"), list);
}

async function children(uri, select, open) {
  let nodes;
  try {
    nodes = await api("GET", "api/v1/fs/ls", { query: { uri } });
  } catch (error) {
    return errorBox(error);
  }
  if (!nodes.length) return h("p.muted", "(empty)");
  return h("ul", nodes.map((n) => {
    const label = n.uri.replace(/\/$/, "").split("/").pop() || n.uri;
    const pick = h("button.link", { type: "button", onclick: () => select(n.uri), title: n.uri,
                                    dataset: { uri: n.uri } }, label);
    if (!n.is_dir) {
      return h(`li.leaf${n.superseded ? ".superseded" : ""}`, pick, n.superseded ? h("span.badge.out", "superseded") : null);
    }
    const box = h("div");
    const details = h("details", { dataset: { uri: n.uri } }, h("summary", h("span.visually-hidden", "directory "), label), box);
    details.addEventListener("toggle", async () => {
      if (!details.open || details.dataset.loaded) return;
      details.dataset.loaded = "1";
      box.append(h("div.row", pick, h("span.muted", " (details)")), await children(n.uri, select, open));
    });
    if (open.has(n.uri)) details.open = true;
    return h("li", details);
  }));
}

async function loadDetail(el, uri, select) {
  let node;
  try {
    node = await api("GET", "api/v1/fs/stat", { query: { uri } });
  } catch (error) {
    clear(el).append(errorBox(error));
    return;
  }
  const crumbs = [];
  const parts = node.uri.replace(/^strata:\/\//, "").split("/").filter(Boolean);
  for (let i = 0; i < parts.length; ++i) {
    const target = `strata://${parts.slice(0, i + 1).join("/")}`;
    crumbs.push(i === parts.length - 1 ? h("span", parts[i]) : h("button.link", { type: "button", onclick: () => select(target) }, parts[i]));
    if (i < parts.length - 1) crumbs.push(" / ");
  }
  const content = h("div", { id: "node-l2" });
  const readL2 = async () => {
    try {
      const r = await api("GET", "api/v1/fs/read", { query: { uri: node.uri, level: 2 } });
      clear(content).append(h("pre.text", r.content));
    } catch (error) {
      clear(content).append(errorBox(error));
    }
  };
  const meta = node.metadata ?? {};
  const validity = [];
  if (node.superseded) validity.push(h("span.badge.out", "superseded"));
  // Times are milliseconds since the epoch (docs/sessions.md: superseded memories keep valid_to and
  // superseded_by).
  if (typeof meta.valid_from === "number") validity.push(h("span", `valid from ${when(meta.valid_from)}`));
  if (typeof meta.valid_to === "number") validity.push(h("span", ` until ${when(meta.valid_to)}`));
  if (meta.superseded_by !== undefined) validity.push(h("span.muted", ` (superseded: ${meta.superseded_by})`));
  clear(el).append(
    h("h2", { id: "node-title" }, node.is_dir ? "Directory" : "Node"),
    h("p.crumbs", crumbs),
    h("dl.props",
      h("dt", "URI"), h("dd", h("code", { id: "node-uri" }, node.uri)),
      h("dt", "Type"), h("dd", `${node.type}${node.category ? ` · ${node.category}` : ""}`),
      h("dt", "Size"), h("dd", `${fmt(node.size)} bytes`),
      h("dt", "Created"), h("dd", when(node.created_ms)),
      h("dt", "Updated"), h("dd", when(node.updated_ms)),
      h("dt", "Validity"), h("dd", { id: "node-validity" }, validity.length ? validity : "current")),
    h("h3", "L0 · abstract"), h("pre.text", { id: "node-l0" }, node.abstract || "(empty)"),
    h("h3", "L1 · overview"), h("pre.text", { id: "node-l1" }, node.overview || "(empty)"),
    node.is_dir ? null : h("h3", "L2 · content"),
    node.is_dir ? null : content,
    h("h3", "Metadata"), h("pre.text", { id: "node-meta" }, JSON.stringify(meta, null, 2)),
    h("h3", "Relations"),
    node.relations?.length
      ? h("ul", { id: "node-relations" }, node.relations.map((r) => {
          const other = r.from === node.uri ? r.to : r.from;
          return h("li", r.from === node.uri ? "→ " : "← ",
                   h("button.link", { type: "button", onclick: () => select(other) }, other),
                   r.reason ? h("span.muted", ` (${r.reason})`) : null);
        }))
      : h("p.muted", "None."),
    node.uri.includes("/memories/") ? h("p", h("a", { href: `#/history?uri=${encodeURIComponent(node.uri)}` }, "History of this memory")) : null);
  if (node.is_dir) {
    let kids = [];
    try {
      kids = await api("GET", "api/v1/fs/ls", { query: { uri: node.uri } });
    } catch { /* The tree shows the error. */ }
    el.append(h("h3", "Children"), kids.length
      ? h("ul", kids.map((k) => h("li", h("button.link", { type: "button", onclick: () => select(k.uri) }, k.uri),
                                   k.abstract ? h("span.muted", ` — ${cut(k.abstract, 120)}`) : null)))
      : h("p.muted", "None."));
  } else {
    await readL2();
  }
}

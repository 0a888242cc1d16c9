// The context window: what a session's next request would hold for a window and encoding, drawn as a bar
// of exact tokens per section, with every message's count and whether it fits.
import { api } from "./api.js";
import { clear, cut, errorBox, fmt, h, messageText, percent, select, toolCalls } from "./dom.js";

// Section order in the bar, with labels; "reply" is the room kept for the answer, "free" what is left.
export const kSections = [
  ["system", "System prompt"], ["pinned", "Pinned"], ["memories", "Memories"], ["summary", "Summary"],
  ["history", "History"], ["reserved", "Tools and other"], ["reply", "Reserved for the reply"], ["free", "Free"],
];
const kEncodings = [["o200k_base", "o200k_base (GPT-4o, o-series)"], ["cl100k_base", "cl100k_base (GPT-4, 3.5)"],
                    ["chars", "characters / 4 (estimate)"]];

export async function render(main, params, nav) {
  const sessions = await api("GET", "api/v1/sessions");
  main.append(h("h1", "Context window"));
  if (!sessions.length) {
    main.append(h("p", "No sessions yet. Create one (", h("code", "POST api/v1/sessions"),
                  ") or talk through the model endpoints with an ", h("code", "X-Strata-Session"), " header."));
    return {};
  }
  const state = {
    session: sessions.some((s) => s.id === params.session) ? params.session : sessions[0].id,
    window: Number(params.window) > 0 ? Number(params.window) : 8000,
    reserve: params.reserve !== undefined && Number(params.reserve) >= 0 ? Number(params.reserve) : null,
    encoding: kEncodings.some(([e]) => e === params.encoding) ? params.encoding : "o200k_base",
  };
  const keep = () => nav.go("context", { session: state.session, window: state.window, reserve: state.reserve ?? "",
                                         encoding: state.encoding }, { replace: true });

  const windowInput = h("input", { id: "ctx-window", type: "number", min: 1, max: 2000000, step: 1, value: state.window });
  const slider = h("input", { id: "ctx-window-range", type: "range", min: 64, max: 32000, step: 64, value: state.window,
                              "aria-label": "Window size (slider)" });
  const reserveInput = h("input", { id: "ctx-reserve", type: "number", min: 0, step: 1, value: state.reserve ?? "",
                                    placeholder: "auto" });
  // Screen readers hear a one-line summary when the numbers change, not the whole list.
  const announce = h("p.visually-hidden", { "aria-live": "polite", id: "ctx-announce" });
  const result = h("div", { id: "ctx-result" });
  let timer = null;
  const changed = (immediate) => {
    clearTimeout(timer);
    timer = setTimeout(() => { keep(); load(); }, immediate ? 0 : 150);
  };
  windowInput.addEventListener("input", () => {
    if (Number(windowInput.value) > 0) {
      state.window = Number(windowInput.value);
      slider.value = String(Math.min(state.window, 32000));
      changed(false);
    }
  });
  slider.addEventListener("input", () => {
    state.window = Number(slider.value);
    windowInput.value = String(state.window);
    changed(false);
  });
  reserveInput.addEventListener("input", () => {
    state.reserve = reserveInput.value === "" ? null : Math.max(0, Number(reserveInput.value));
    changed(false);
  });

  main.append(h("form.controls", { onsubmit: (e) => { e.preventDefault(); changed(true); } },
    h("div.field", select("ctx-session", "Session", sessions.map((s) => [s.id, `${s.id} (${s.user || "no user"})`]),
                          state.session, (v) => { state.session = v; changed(true); })),
    h("div.field", h("label", { for: "ctx-window" }, "Window (tokens)"), windowInput, slider),
    h("div.field", h("label", { for: "ctx-reserve" }, "Reserve for the reply"), reserveInput),
    h("div.field", select("ctx-encoding", "Encoding", kEncodings, state.encoding,
                          (v) => { state.encoding = v; changed(true); }))));
  main.append(announce, result);

  let loading = 0;
  async function load() {
    const mine = ++loading;
    let ctx;
    try {
      ctx = await api("GET", `api/v1/sessions/${encodeURIComponent(state.session)}/context`, {
        query: { max_context_tokens: state.window, reserve_for_reply: state.reserve ?? undefined, encoding: state.encoding },
      });
    } catch (error) {
      if (mine === loading) clear(result).append(errorBox(error));
      return;
    }
    if (mine !== loading || !nav.isCurrent()) return;
    clear(result).append(...view(ctx, nav));
    const included = ctx.messages.filter((m) => m.included).length;
    announce.textContent = `${fmt(ctx.total_tokens)} of ${fmt(ctx.window)} tokens; ${included} of ${ctx.messages.length} messages included.`;
  }
  await load();
  return { refresh: load };
}

function view(ctx, nav) {
  const s = ctx.sections;
  const free = Math.max(0, ctx.window - ctx.total_tokens - s.reply);
  const values = { ...s, free };
  const summary = kSections.filter(([k]) => values[k] > 0)
    .map(([k, label]) => `${label} ${fmt(values[k])}`).join(", ");
  const bar = h("div.bar", { role: "img", id: "ctx-bar", dataset: { window: ctx.window },
                             "aria-label": `Window of ${fmt(ctx.window)} tokens: ${summary}` },
    kSections.filter(([k]) => values[k] > 0).map(([k, label]) =>
      h(`div.seg.s-${k}`, { style: { flexGrow: String(values[k]) }, title: `${label}: ${fmt(values[k])} tokens`,
                            dataset: { section: k, tokens: values[k] } })));
  const table = h("table.sections", { id: "ctx-sections" },
    h("caption", "Tokens per section (exact, ", ctx.encoding, ")"),
    h("thead", h("tr", h("th", { scope: "col" }, "Section"), h("th.num", { scope: "col" }, "Tokens"),
                 h("th.num", { scope: "col" }, "Share of the window"))),
    h("tbody", kSections.map(([k, label]) => h("tr", { dataset: { section: k } },
      h("th", { scope: "row" }, h(`span.swatch.s-${k}`, { "aria-hidden": "true" }), label),
      h("td.num", { dataset: { tokens: values[k] } }, fmt(values[k])),
      h("td.num", percent(values[k], ctx.window))))),
    h("tfoot", h("tr", h("th", { scope: "row" }, "Sent (total)"),
                 h("td.num", { id: "ctx-total", dataset: { tokens: ctx.total_tokens } }, fmt(ctx.total_tokens)),
                 h("td.num", `of a ${fmt(ctx.budget)}-token budget`))));

  const included = ctx.messages.filter((m) => m.included).length;
  const out = [
    h("section", { "aria-labelledby": "ctx-bar-title" },
      h("h2", { id: "ctx-bar-title" }, "What fits"),
      h("p.lead", h("strong", fmt(ctx.total_tokens)), " of ", fmt(ctx.window), " tokens (budget ", fmt(ctx.budget),
        " after ", fmt(s.reply), " kept for the reply); ", h("span", { id: "ctx-included" }, `${included} of ${ctx.messages.length}`),
        " messages included."),
      bar, table),
  ];
  if (ctx.warnings?.length) {
    out.push(h("section.warnings", { "aria-labelledby": "ctx-warn-title" },
      h("h2", { id: "ctx-warn-title" }, "Left out, and why"),
      h("ul", { id: "ctx-warnings" }, ctx.warnings.map((w) => h("li", String(w))))));
  }
  if (ctx.system_prompt) {
    out.push(h("section", h("h2", "System prompt ", h("span.muted", `(${fmt(s.system)} tokens` +
                                                        (s.memories ? `, and ${fmt(s.memories)} for the memories under it)` : ")"))),
                   h("pre.text", { id: "ctx-system" }, ctx.system_prompt)));
  }
  if (ctx.memories?.length) {
    out.push(h("section", h("h2", "Memories recalled for this turn"),
      h("ul.hits", ctx.memories.map((m) => h("li",
        h("a", { href: `#/store?uri=${encodeURIComponent(m.uri)}` }, m.uri), " ",
        h("span.score", `score ${Number(m.score).toFixed(3)}`), " ", h("span.muted", m.reason),
        h("div", m.abstract))))));
  }
  out.push(h("section", { "aria-labelledby": "ctx-msg-title" },
    h("h2", { id: "ctx-msg-title" }, "Messages, oldest first"),
    h("ol.messages", { id: "ctx-messages", start: 0 }, ctx.messages.map((m) => {
      const text = messageText(m.message);
      const calls = toolCalls(m.message);
      return h(`li.msg.role-${m.message?.role ?? "unknown"}${m.included ? "" : ".excluded"}`,
               { dataset: { index: m.index, tokens: m.tokens, included: m.included } },
        h("div.msg-head",
          h("span.role", m.message?.role ?? "?"),
          m.index === 0 && ctx.summary_included ? h("span.badge.summary", "summary of earlier turns") : null,
          h("span.tokens", `${fmt(m.tokens)} tokens`),
          h(`span.badge.${m.included ? "in" : "out"}`, m.included ? "included" : "left out")),
        text.length > 400 ? h("details", h("summary", cut(text, 200)), h("pre.text", text)) : h("pre.text", text),
        calls.length ? h("ul.calls", calls.map((c) => h("li", h("code", cut(c, 300))))) : null);
    }))));
  void nav;
  return out;
}

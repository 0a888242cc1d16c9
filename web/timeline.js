// A session's conversation timeline: its current log (system prompt, messages, checkpoints, usage marks, a
// compaction's summary), the rotations that reverts and compactions kept, and its committed archives.
// Revert and fork are offered at each checkpoint, behind a confirmation.
import { api } from "./api.js";
import { clear, confirmDialog, cut, errorBox, fmt, h, messageText, select, toast, toolCalls } from "./dom.js";

export async function render(main, params, nav) {
  const sessions = await api("GET", "api/v1/sessions");
  main.append(h("h1", "Conversation timeline"));
  if (!sessions.length) {
    main.append(h("p", "No sessions yet."));
    return {};
  }
  const id = sessions.some((s) => s.id === params.session) ? params.session : sessions[0].id;
  main.append(h("form.controls", { onsubmit: (e) => e.preventDefault() },
    h("div.field", select("tl-session", "Session", sessions.map((s) => [s.id, `${s.id} (${s.user || "no user"})`]), id,
                          (v) => nav.go("timeline", { session: v })))));
  const body = h("div", { id: "tl-body" });
  main.append(body);

  async function load() {
    const path = `api/v1/sessions/${encodeURIComponent(id)}`;
    let log, status, info;
    try {
      [log, status, info] = await Promise.all([api("GET", `${path}/log`), api("GET", `${path}/status`), api("GET", path)]);
    } catch (error) {
      clear(body).append(errorBox(error));
      return;
    }
    if (!nav.isCurrent()) return;
    clear(body).append(...view(id, info, log, status, nav, load));
  }
  await load();
  return { refresh: load };
}

function view(id, info, log, status, nav, reload) {
  const out = [];
  const stats = info.stats ?? {};
  out.push(h("p.lead", `${fmt(log.messages.length)} messages in the current log, ${fmt(log.checkpoints.length)} checkpoints; `,
             `${fmt(stats.commits ?? 0)} commits so far, ${fmt(stats.memories_extracted ?? 0)} memories extracted. `,
             h("a", { href: `#/context?session=${encodeURIComponent(id)}` }, "See its context window")));

  // Checkpoints and usage marks sit between messages: each at the number of messages before it.
  // At one position, file order: the k-th checkpoint (0-based, in the live list) comes before a usage mark
  // with checkpoints_before > k.
  const marks = new Map();
  const at = (n) => marks.get(n) ?? (marks.set(n, []), marks.get(n));
  log.checkpoints.forEach((cp, k) => at(cp.messages).push({ kind: "checkpoint", cp, order: k + 0.5 }));
  for (const u of log.usage_marks ?? []) at(u.messages).push({ kind: "usage", u, order: u.checkpoints_before });
  for (const list of marks.values()) list.sort((a, b) => a.order - b.order);

  const items = [];
  if (log.system_prompt !== null && log.system_prompt !== undefined) {
    items.push(h("li.event.system", h("div.msg-head", h("span.role", "system prompt")), h("pre.text", log.system_prompt)));
  }
  for (let i = 0; i <= log.messages.length; ++i) {
    for (const mark of marks.get(i) ?? []) {
      if (mark.kind === "checkpoint") items.push(checkpointItem(id, mark.cp, nav, reload));
      else items.push(h("li.event.usage", { dataset: { tokens: mark.u.tokens } },
                        h("span.icon", { "aria-hidden": "true" }, "Σ"),
                        `Usage mark: the provider counted ${fmt(mark.u.tokens)} tokens of context here`));
    }
    if (i === log.messages.length) break;
    const m = log.messages[i];
    const calls = toolCalls(m);
    items.push(h(`li.msg.role-${m.role ?? "unknown"}`, { dataset: { index: i } },
      h("div.msg-head", h("span.index", `#${i}`), h("span.role", m.role ?? "?"),
        m.tool_call_id ? h("span.muted", `result of ${m.tool_call_id}`) : null,
        i === 0 && log.summary ? h("span.badge.summary", "compaction summary") : null),
      h("pre.text", cut(messageText(m), 4000)),
      calls.length ? h("ul.calls", calls.map((c) => h("li", h("code", cut(c, 300))))) : null));
  }
  out.push(h("section", { "aria-labelledby": "tl-log-title" },
    h("h2", { id: "tl-log-title" }, "Current log"),
    items.length ? h("ol.timeline", { id: "tl-items" }, items) : h("p.muted", "The log is empty.")));

  out.push(h("section", { "aria-labelledby": "tl-rot-title" },
    h("h2", { id: "tl-rot-title" }, "Rotations"),
    h("p.muted", "Earlier versions of the log, kept whole by reverts and compactions."),
    log.rotations?.length ? h("ul", { id: "tl-rotations" }, log.rotations.map((r) => h("li", h("code", r))))
                          : h("p", "None.")));

  out.push(h("section", { "aria-labelledby": "tl-arch-title" },
    h("h2", { id: "tl-arch-title" }, "Commits"),
    status.archives?.length
      ? h("table", { id: "tl-archives" },
          h("thead", h("tr", h("th", { scope: "col" }, "Archive"), h("th.num", { scope: "col" }, "Messages"),
                       h("th", { scope: "col" }, "State"), h("th", { scope: "col" }, "Notes"))),
          h("tbody", status.archives.map((a) => h("tr", { dataset: { archive: a.archive, state: a.state } },
            h("td", String(a.archive)), h("td.num", fmt(a.messages)), h("td", h(`span.state.st-${a.state}`, a.state)),
            h("td", a.error ? h("span.error-text", a.error) : "", a.notes ? ` ${a.notes}` : "")))))
      : h("p", "Nothing committed yet."),
    h("p", h("a", { href: `#/history?session=${encodeURIComponent(id)}` }, "Background jobs and memory changes"))));
  return out;
}

function checkpointItem(id, cp, nav, reload) {
  const path = `api/v1/sessions/${encodeURIComponent(id)}`;
  const revert = async () => {
    const ok = await confirmDialog(`Revert to checkpoint ${cp.id}?`,
      `Checkpoint ${cp.id} and everything after it leave the current log (${cp.messages} messages stay). ` +
      "The old log is kept as a rotation.", "Revert");
    if (!ok) return;
    try {
      // With its tag: if the session was committed, reverted or compacted since this page read the log,
      // the checkpoint with this id now marks another point and the server refuses (409).
      await api("POST", `${path}/revert`, { body: { checkpoint: cp.id, tag: cp.tag } });
      toast(`Reverted ${id} to checkpoint ${cp.id}.`);
      await reload();
    } catch (error) {
      await failed("Revert", error);
    }
  };
  const fork = async () => {
    const input = h("input", { id: "fork-id", type: "text", placeholder: "new session id (empty: generated)",
                               pattern: "[A-Za-z0-9_.\\-]*", "aria-label": "New session id" });
    const ok = await confirmDialog(`Fork at checkpoint ${cp.id}?`,
      `A new session gets this session's owners, system prompt and the ${cp.messages} messages before checkpoint ${cp.id}.`,
      "Fork", input);
    if (!ok) return;
    try {
      const made = await api("POST", `${path}/fork`,
                             { body: { checkpoint: cp.id, tag: cp.tag, id: input.value.trim() || undefined } });
      toast(`Forked into ${made.id}.`);
      nav.go("timeline", { session: made.id });
    } catch (error) {
      await failed("Fork", error);
    }
  };
  // A checkpoint the log no longer has as this page showed it: say so and show the log as it is now.
  const failed = async (what, error) => {
    if (error.status === 409 || error.status === 404) {
      toast(`${what} refused: the session changed since this page read it (${error.message}). Showing it as it is now.`);
      await reload();
    } else {
      toast(`${what} failed: ${error.message}`);
    }
  };
  return h("li.event.checkpoint", { dataset: { checkpoint: cp.id } },
    h("span.icon", { "aria-hidden": "true" }, "⚑"), h("strong", `Checkpoint ${cp.id}`),
    h("span.muted", ` after ${fmt(cp.messages)} messages`),
    h("span.actions",
      h("button.secondary", { type: "button", onclick: revert, dataset: { action: "revert" } }, `Revert to ${cp.id}`),
      h("button.secondary", { type: "button", onclick: fork, dataset: { action: "fork" } }, "Fork here")));
}

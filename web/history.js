// Memory history: the audit trail of one memory (created, merged, superseded, deleted, with the commit that
// did it and its before/after text), the newest changes under a scope, and the phase-2 jobs behind them
// with their state, attempts, errors and dead letters.
import { api } from "./api.js";
import { clear, cut, errorBox, fieldsForm, fmt, h, toast, when } from "./dom.js";

export async function render(main, params, nav) {
  main.append(h("h1", "Memory history"));
  main.append(fieldsForm([
    { name: "uri", id: "hist-uri", label: "Memory", value: params.uri, placeholder: "strata://user/alice/memories/…", grow: true },
    { name: "under", id: "hist-under", label: "Changes under", value: params.under, placeholder: "everything you can reach" },
  ], "Show", (values) => nav.go("history", { ...params, ...values })));
  const trail = h("section", { id: "hist-trail", "aria-label": "Audit trail" });
  const recent = h("section", { id: "hist-recent", "aria-label": "Recent changes" });
  const jobs = h("section", { id: "hist-jobs", "aria-label": "Background jobs" });
  main.append(trail, recent, jobs);
  const show = (uri) => nav.go("history", { ...params, uri });

  async function load() {
    await Promise.all([
      params.uri ? loadTrail(trail, params.uri) : Promise.resolve(clear(trail)),
      loadRecent(recent, params.under, show),
      loadJobs(jobs, params.session, load),
    ]);
  }
  await load();
  return { refresh: load };
}

const kActionText = { create: "created", update: "updated", merge: "merged into", supersede: "superseded", delete: "deleted",
                      skip: "skipped (already known)" };

function source(entry) {
  // "<session>@<incarnation>#<archive>#<candidate>" (a commit), "remember#<ms>#0" or "consolidate#<ms>#<n>".
  // `session` is set only while the session that made the change lives (not another one given its id later).
  const text = String(entry.source ?? "");
  const [ref, archive, candidate] = text.split("#");
  if (ref === "remember") return h("span", "remember (no session)");
  if (ref === "consolidate") return h("span", "consolidation");
  if (text === "") return h("span.muted", "another user's session");
  if (!archive) return h("span", text);
  const where = `, archive ${archive}` + (candidate !== undefined ? `, candidate ${candidate}` : "");
  if (!entry.session) return h("span", "commit of a deleted session", where);
  return h("span", "commit of ", h("a", { href: `#/timeline?session=${encodeURIComponent(entry.session)}` }, entry.session), where);
}

async function loadTrail(el, uri) {
  let entries;
  try {
    entries = await api("GET", "api/v1/memories/history", { query: { uri } });
  } catch (error) {
    clear(el).append(errorBox(error));
    return;
  }
  clear(el).append(h("h2", "Audit trail of ", h("code", uri)), h("p", h("a", { href: `#/store?uri=${encodeURIComponent(uri)}` }, "Open it in the store")),
    entries.length === 0 ? h("p", "No recorded change: written directly, not through a commit or remember.")
      : h("ol.trail", { id: "hist-entries" }, entries.map((e) => h("li", { dataset: { action: e.action } },
          h("div.msg-head", h(`span.badge.act-${e.action}`, kActionText[e.action] ?? e.action), h("span.muted", when(e.at_ms))),
          h("div", "by ", source(e)),
          e.reason ? h("div.reason", "why: ", e.reason) : null,
          e.before ? h("details", h("summary", "before"), h("pre.text", e.before)) : null,
          e.after ? h("details", { open: true }, h("summary", "after"), h("pre.text", e.after)) : null))));
}

async function loadRecent(el, under, show) {
  let changes;
  try {
    changes = await api("GET", "api/v1/memories/changes", { query: { under: under || undefined, limit: 50 } });
  } catch (error) {
    clear(el).append(errorBox(error));
    return;
  }
  clear(el).append(h("h2", "Recent memory changes"),
    changes.length === 0 ? h("p", "No memory has changed yet.")
      : h("table", { id: "hist-changes" },
          h("thead", h("tr", ["When", "Change", "Memory", "By", "Why"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", changes.map((c) => h("tr", { dataset: { uri: c.uri, action: c.action } },
            h("td", when(c.at_ms)), h("td", h(`span.badge.act-${c.action}`, c.action)),
            h("td", h("button.link", { type: "button", onclick: () => show(c.uri) }, c.uri)),
            h("td", source(c)), h("td", cut(c.reason ?? "", 160)))))));
}

async function loadJobs(el, session, reload) {
  let jobs;
  try {
    jobs = await api("GET", "api/v1/tasks", { query: { session: session || undefined } });
  } catch (error) {
    clear(el).append(errorBox(error));
    return;
  }
  const dead = jobs.filter((j) => j.state === "dead").length;
  const retry = async (sessionId) => {
    try {
      const done = await api("POST", `api/v1/sessions/${encodeURIComponent(sessionId)}/retry`, { body: {} });
      toast(`${done.requeued} job${done.requeued === 1 ? "" : "s"} of ${sessionId} queued again.`);
      await reload();
    } catch (error) {
      toast(`Retry failed: ${error.message}`);
    }
  };
  clear(el).append(h("h2", "Commits and background jobs", session ? ` of ${session}` : ""),
    dead ? h("p.warning", `${dead} dead letter${dead > 1 ? "s" : ""}: jobs that failed for good; fix the cause, then retry.`) : null,
    jobs.length === 0 ? h("p", "No job yet.")
      : h("table", { id: "hist-tasks" },
          h("thead", h("tr", ["Task", "Session", "Archive", "State", "Attempts", "Updated", "Last error", ""].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", jobs.map((j) => h("tr", { dataset: { task: j.id, state: j.state } },
            h("td", String(j.id)),
            h("td", j.session ? h("a", { href: `#/timeline?session=${encodeURIComponent(j.session)}` }, j.session) : ""),
            h("td", j.payload?.archive !== undefined ? String(j.payload.archive) : ""),
            h("td", h(`span.state.st-${j.state}`, j.state)),
            h("td.num", fmt(j.attempts)),
            h("td", when(j.updated_ms)),
            h("td", j.last_error ? h("span.error-text", cut(j.last_error, 300)) : ""),
            h("td", j.state === "dead" ? h("button.secondary", { type: "button", onclick: () => retry(j.session) }, "Retry") : ""))))));
}

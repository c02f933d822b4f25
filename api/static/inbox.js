// The console's Inbox page (served at /pages/inbox.js): what waits on a person or a client across the
// workspace (GET /v1/inbox), oldest first, filtered by kind, agent and subject.

export const FILTERS = ["kind", "agent_id", "subject"];

/** The filters a hash names (`#inbox&kind=call&subject=u-1`), empty ones left out. */
export function filtersOf(hash) {
  const params = new URLSearchParams(hash);
  const filters = {};
  for (const name of FILTERS) {
    const value = (params.get(name) ?? "").trim();
    if (value) filters[name] = value;
  }
  return filters;
}

/** The hash that shows the inbox with these filters. */
export function hashOf(filters) {
  const params = new URLSearchParams();
  for (const name of FILTERS) if (filters[name]) params.set(name, filters[name]);
  const rest = params.toString();
  return rest ? `inbox&${rest}` : "inbox";
}

/** The request for a page of the inbox with these filters, after this cursor (null: the first page). */
export function inboxPath(filters = {}, after = null, limit = 50) {
  const query = new URLSearchParams({ limit: String(limit) });
  for (const name of FILTERS) if (filters[name]) query.set(name, filters[name]);
  if (after) query.set("after", after);
  return `/v1/inbox?${query}`;
}

/** A page of the inbox through `api` (the console's `(method, path) => parsed body`). */
export function inboxPage(api, filters, after = null) {
  return api("GET", inboxPath(filters, after));
}

const KIND_TEXT = { approval: "approval", call: "call waiting for its client", input: "input request" };

/** The table rows of `items`; `el` and `when` are the console's element and time helpers. */
export function inboxRows(items, { el, when }) {
  return items.map((item) =>
    el("tr", { class: "clickable", "data-call": item.call_id, onclick: () => { location.hash = `session=${item.session_id}`; } },
      el("td", {}, KIND_TEXT[item.kind] ?? item.kind),
      el("td", {}, el("code", { title: item.session_id }, `…${item.session_id.slice(-6)}`)),
      el("td", {}, el("code", {}, item.tool), item.client_name ? el("span", { class: "muted" }, ` on ${item.client_name}`) : ""),
      el("td", {}, item.subject ?? el("span", { class: "muted" }, "—")),
      el("td", {}, when(item.since)),
      el("td", {}, item.deadline ? when(item.deadline) : el("span", { class: "muted" }, "none"))));
}

// The console's Inbox page (served at /pages/inbox.js): what waits on a person or a client across the
// workspace (GET /v1/inbox), oldest first, filtered by kind, agent and subject.

import { safeLink } from "./sign-ins.js";

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

const KIND_TEXT = {
  approval: "approval", call: "call waiting for its client", input: "input request", authorization: "sign-in",
};

/** What waits, in the row's third cell: the tool (on its client), or a sign-in's grant and its link. */
function whatWaits(item, el) {
  if (item.kind === "authorization") {
    const url = safeLink(item.authorization_url);
    // The link opens the authorization server in a new tab; the row's own click (to the session) is not taken.
    const link = url
      ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer", onclick: (event) => event.stopPropagation() }, "sign in")
      : el("span", { class: "muted" }, "no http(s) link");
    return [el("code", {}, item.tool), " ", link];
  }
  return [el("code", {}, item.tool), item.client_name ? el("span", { class: "muted" }, ` on ${item.client_name}`) : ""];
}

/** The table rows of `items`; `el` and `when` are the console's element and time helpers. */
export function inboxRows(items, { el, when }) {
  return items.map((item) =>
    el("tr", { class: "clickable", "data-call": item.call_id, onclick: () => { location.hash = `session=${item.session_id}`; } },
      el("td", {}, KIND_TEXT[item.kind] ?? item.kind),
      el("td", {}, el("code", { title: item.session_id }, `…${item.session_id.slice(-6)}`)),
      el("td", {}, ...whatWaits(item, el)),
      el("td", {}, item.subject ?? el("span", { class: "muted" }, "—")),
      el("td", {}, when(item.since)),
      el("td", {}, item.deadline ? when(item.deadline) : el("span", { class: "muted" }, "none"))));
}

/** Wires the page's Inbox section (console.html `#inbox`) to the console's helpers (`$`, `el`, `api`,
 * `when`); returns `show(filters)`, which shows the first page for those filters. */
export function mountInbox({ $, el, api, when }) {
  let filters = {};
  let cursor = null;

  async function more(first = false) {
    const rows = $("inbox-rows");
    try {
      const page = await inboxPage(api, filters, first ? null : cursor);
      const found = inboxRows(page.items, { el, when });
      if (first) rows.replaceChildren(...found);
      else rows.append(...found);
      if (!rows.children.length) rows.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "Nothing waits.")));
      cursor = page.next_cursor;
      $("inbox-more").classList.toggle("hidden", !cursor);
      $("inbox-note").textContent = "";
    } catch (error) {
      $("inbox-note").textContent = error.message;
      $("inbox-note").style.color = "var(--bad)";
      if (first) rows.replaceChildren();
    }
  }

  async function show(asked) {
    $("inbox").classList.remove("hidden");
    $("crumb").replaceChildren(el("a", { href: "#" }, "sessions"), " / inbox");
    filters = asked;
    const form = $("inbox-filters");
    for (const name of FILTERS) form.elements[name].value = filters[name] ?? "";
    $("inbox-rows").replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "Loading…")));
    await more(true);
  }

  $("inbox-filters").onsubmit = (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    const asked = {};
    for (const name of FILTERS) {
      const value = String(data.get(name) ?? "").trim();
      if (value) asked[name] = value;
    }
    const target = `#${hashOf(asked)}`;
    if (location.hash === target) show(asked);
    else location.hash = target;
  };
  $("inbox-refresh").onclick = () => show(filters);
  $("inbox-more").onclick = () => more();
  return show;
}

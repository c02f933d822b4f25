// The console's sign-ins (served at /pages/sign-ins.js): a step needs an OAuth grant's MCP server the person
// has not signed in to (`mcp_authorization_required`); the console shows the grant, the server, a "Sign in"
// link that opens the authorization server in a new tab, and a Decline button. The card goes once the
// sign-in ends: `mcp_authorization_completed`, `mcp_authorization_declined` (declined, or the wait ran out),
// or its `expires_at` passing.

/** `url` when it is an absolute http(s) URL, else null: anything else (`javascript:`, `data:`, a relative
 * path) is never made a link, whatever an event says. */
export function safeLink(url) {
  if (typeof url !== "string") return null;
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
}

/** Declines sign-in `authorizationId` through `api` (the console's `(method, path, body) => parsed body`). */
export function declineSignIn(api, sessionId, authorizationId) {
  return api("POST", `/v1/sessions/${sessionId}/mcp-authorizations/${encodeURIComponent(authorizationId)}/decline`, {});
}

/** The card of one waiting sign-in (`asked`: its `mcp_authorization_required` event); `decline()` posts the
 * decline and rejects with the server's error. `el` is the console's element helper, which sets text as
 * text nodes: nothing an event carries is parsed as HTML. */
export function signInCard(asked, { el, decline }) {
  const problem = el("div", { class: "problem note" });
  const link = safeLink(asked.authorization_url);
  const open = link
    ? el("a", { class: "sign-in-link", href: link, target: "_blank", rel: "noopener noreferrer" }, "Sign in")
    : el("span", { class: "problem note" }, "the sign-in link is not an http(s) address; it is not shown");
  const refuse = async () => {
    problem.textContent = "";
    try { await decline(); } catch (error) { problem.textContent = error.message; }
  };
  return el("div", { class: "sign-in", "data-authorization": asked.authorization_id },
    el("div", {}, el("b", {}, asked.grant), " ", el("span", { class: "muted" }, "asks you to sign in to its server")),
    el("div", { class: "mono" }, asked.server_url),
    asked.expires_at ? el("div", { class: "note" }, `until ${new Date(asked.expires_at).toLocaleString()}`) : "",
    el("div", { class: "actions" }, open, el("button", { type: "button", class: "plain", onclick: refuse }, "Decline")),
    problem);
}

const ENDINGS = new Set(["mcp_authorization_completed", "mcp_authorization_declined"]);

/** Wires the session view's Sign-ins panel (console.html `#mcp-signins-panel`) to the console's helpers (`$`,
 * `el`, `api`), `sessionId()` (the open session's id) and `now()` (ms; defaults to Date.now); returns
 * `{see(event), reset(), tick()}`: `see` takes every event of the session (it reads the three sign-in events, shown
 * with `?include=extensions`). */
export function mountSignIns({ $, el, api, sessionId, now = Date.now }) {
  const waiting = new Map();

  // Drops those whose link ran out (a log read back from long ago, or no event yet): whether any went.
  function expire() {
    let gone = false;
    for (const [id, entry] of waiting) {
      const expires = Date.parse(entry.asked.expires_at ?? "");
      if (Number.isFinite(expires) && expires <= now()) gone = waiting.delete(id);
    }
    return gone;
  }

  function render() {
    expire();
    const open = [...waiting.values()];
    $("mcp-signin-count").textContent = open.length ? String(open.length) : "";
    $("mcp-signins-panel").classList.toggle("empty", !open.length);
    if (!open.length) return $("mcp-signins").replaceChildren(el("p", { class: "note" }, "None."));
    $("mcp-signins").replaceChildren(...open.map((entry) => {
      entry.node ??= signInCard(entry.asked, { el, decline: () => declineSignIn(api, sessionId(), entry.asked.authorization_id) });
      return entry.node;
    }));
  }

  function see(event) {
    if (event.type === "mcp_authorization_required") {
      waiting.set(event.authorization_id, { asked: event, node: null });
    } else if (ENDINGS.has(event.type)) {
      if (!waiting.delete(event.authorization_id)) return;
    } else {
      return;
    }
    render();
  }

  function reset() {
    waiting.clear();
    render();
  }

  /** Called now and then (the console's clock): a sign-in whose link ran out goes. */
  function tick() {
    if (expire()) render();
  }

  return { see, reset, tick };
}

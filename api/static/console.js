import { connect } from "/sdk/switchboard.js";
import { blockText, readable, tokens, toEnd } from "/pages/transcript.js";
import { filtersOf, mountInbox } from "/pages/inbox.js";
import { mountInputs } from "/pages/input-form.js";
import { mountSignIns } from "/pages/sign-ins.js";
import { mountTimeline } from "/pages/timeline-view.js";

const $ = (id) => document.getElementById(id);
// The same store and key name as the demo (same origin), so a link from one opens the other signed in.
const store = localStorage;
const KEY = "switchboard.key";
const TOKEN = "switchboard.console.token";
const TOKEN_SESSION = "switchboard.console.session";
// A session a link asked for before sign-in: opened once signed in.
let wanted = null;
let listTimer = null;
// Approvals decided in this tab, so their card says "you".
const decidedHere = new Set();
let live = null;
let clientsTimer = null;
let tickTimer = null;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  return node;
}

function credential() { return store.getItem(TOKEN) ?? store.getItem(KEY); }
function tokenSession() { return store.getItem(TOKEN_SESSION); }
function isKey() { return (credential() ?? "").startsWith("swb_ak_"); }

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: {
      Authorization: `Bearer ${credential()}`,
      ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
      ...(method !== "GET" ? { "Idempotency-Key": crypto.randomUUID() } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = await response.json().catch(() => null);
  if (!response.ok) throw new Error(parsed?.error?.message ?? `${response.status} ${response.statusText}`);
  return parsed;
}

// The end of an id: ids are time-ordered, so their starts look alike; their ends are random.
const short = (id) => `…${(id ?? "").slice(-6)}`;
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const ms = (a, b) => (a && b ? `${Math.max(0, new Date(b) - new Date(a))} ms` : "");
const textOf = (content) => (content ?? []).filter((b) => b.type === "text").map((b) => b.data.text).join("");

// ---- routing ----------------------------------------------------------------------------------------

function route() {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("key")) {
    store.setItem(KEY, hash.get("key"));
    store.removeItem(TOKEN);
    store.removeItem(TOKEN_SESSION);
    hash.delete("key");
    history.replaceState(null, "", `#${hash}`);
  }
  for (const id of ["signin", "sessions", "view", "inbox"]) $(id).classList.add("hidden");
  closeSession();
  clearInterval(listTimer);
  if (!credential()) {
    wanted = hash.get("session") ?? wanted;
    return showSignin(wanted ? "Sign in to open the session the link named." : "");
  }
  $("signout").classList.remove("hidden");
  $("inbox-link").classList.toggle("hidden", !isKey());
  const session = hash.get("session") ?? (isKey() ? null : tokenSession());
  if (session) return openSession(session);
  if (!isKey()) return showSignin("A session token can only open its own session.");
  if (hash.has("inbox")) return showInbox(filtersOf(hash));
  return listSessions();
}

function showSignin(message = "") {
  $("signin").classList.remove("hidden");
  $("signin-error").textContent = message;
  $("crumb").textContent = "";
}

$("signin-form").onsubmit = (event) => {
  event.preventDefault();
  const data = new FormData(event.target);
  const value = String(data.get("credential")).trim();
  const session = String(data.get("session") ?? "").trim();
  if (value.startsWith("swb_st_") && !session) return showSignin("Give the session id that goes with this token.");
  if (value.startsWith("swb_st_")) {
    store.setItem(TOKEN, value);
    store.setItem(TOKEN_SESSION, session);
  } else {
    store.setItem(KEY, value);
    store.removeItem(TOKEN);
    store.removeItem(TOKEN_SESSION);
  }
  const open = session || wanted;
  wanted = null;
  const target = open ? `#session=${open}` : "";
  // A changed hash routes by itself (hashchange); an unchanged one does not.
  if (location.hash === target) route();
  else location.hash = target;
};

$("signout").onclick = () => {
  for (const name of [KEY, TOKEN, TOKEN_SESSION]) store.removeItem(name);
  location.hash = "";
  route();
};

window.addEventListener("hashchange", route);

// ---- sessions list ----------------------------------------------------------------------------------

async function listSessions() {
  $("sessions").classList.remove("hidden");
  $("crumb").textContent = "sessions";
  const rows = $("session-rows");
  if (!rows.children.length) rows.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "Loading…")));
  // The list follows new sessions by itself while it is shown.
  clearInterval(listTimer);
  listTimer = setInterval(() => { if (!$("sessions").classList.contains("hidden")) refreshSessions(); }, 5000);
  await refreshSessions();
}

async function refreshSessions() {
  const rows = $("session-rows");
  try {
    const page = await api("GET", "/v1/sessions?limit=50&order=desc");
    rows.replaceChildren(
      ...page.items.map((s) =>
        el("tr", { class: "clickable", onclick: () => { location.hash = `session=${s.id}`; } },
          el("td", {}, el("code", { class: "full-id" }, s.id), el("code", { class: "short-id", title: s.id }, short(s.id))),
          el("td", {}, s.display_name || el("span", { class: "muted" }, "(unnamed)")),
          el("td", {}, s.status),
          el("td", {}, when(s.created_at)))),
    );
    if (!page.items.length) rows.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No sessions yet.")));
    $("more").textContent = page.next_cursor ? "Showing the newest 50." : "";
  } catch (error) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: 4, style: "color: var(--bad)" }, error.message)));
  }
}

$("refresh").onclick = listSessions;

// ---- inbox ------------------------------------------------------------------------------------------

const showInbox = mountInbox({ $, el, api, when });
const inputs = mountInputs({ $, el, api, sessionId: () => live.sessionId });
const signIns = mountSignIns({ $, el, api, sessionId: () => live.sessionId });
// The deployment's trace UI address (SWITCHBOARD_TRACE_URL_TEMPLATE), given to API keys only.
let traceTemplate = null;
const timeline = mountTimeline({ $, el, template: () => traceTemplate });

// ---- one session ------------------------------------------------------------------------------------

const state = { calls: new Map(), clients: new Map(), names: new Map(), approvals: new Map(), running: false, steps: [] };

function closeSession() {
  opening++;
  live?.close();
  live = null;
  clearInterval(clientsTimer);
  clearInterval(tickTimer);
  $("conn-pill").classList.add("hidden");
}

function resetState() {
  state.calls.clear(); state.clients.clear(); state.names.clear(); state.approvals.clear();
  state.running = false;
  $("transcript").replaceChildren();
  following = true;
  renderApprovals();
  inputs.reset();
  signIns.reset();
  timeline.reset();
  renderClients();
}

let opening = 0;

async function openSession(id) {
  const mine = ++opening;
  $("view").classList.remove("hidden");
  $("crumb").replaceChildren(isKey() ? el("a", { href: "#" }, "sessions") : "", isKey() ? " / " : "", el("code", {}, id));
  resetState();
  try {
    const [info, config] = await Promise.all([api("GET", `/v1/sessions/${id}`), api("GET", "/console/config").catch(() => null)]);
    traceTemplate = config?.trace_url_template ?? null;
    $("facts").replaceChildren(
      el("div", {}, "id ", el("code", {}, info.id)),
      el("div", {}, "agent ", el("code", {}, info.agent_id)),
      el("div", {}, `created ${when(info.created_at)}`),
      info.subject ? el("div", {}, "subject ", el("code", {}, info.subject)) : "",
    );
  } catch (error) {
    $("transcript").replaceChildren(el("p", { class: "note", style: "color: var(--bad)" }, error.message));
    return;
  }
  if (mine !== opening) return; // another session was opened (or this one again) while this one loaded
  live = connect({ sessionId: id, token: credential(), history: true, include: "progress,images,extensions,timing" });
  $("conn-pill").classList.remove("hidden");
  const setConn = (status) => { $("conn").textContent = status; $("conn-pill").className = `pill ${status}`; };
  setConn(live.status);
  live.on("status", setConn);
  live.on("*", (event) => see(event));
  refreshClients(id);
  clientsTimer = setInterval(() => refreshClients(id), 5000);
  tickTimer = setInterval(() => { renderClients(); signIns.tick(); }, 1000);
  $("say-form").onsubmit = async (event) => {
    event.preventDefault();
    const text = $("say").value.trim();
    if (!text) return;
    $("say-error").textContent = "";
    try { await live.send(text); $("say").value = ""; } catch (error) { $("say-error").textContent = error.message; }
  };
  $("cancel").onclick = async () => {
    if (!confirm("Cancel the run? Its owed calls fail and it ends with run_cancelled.")) return;
    try { await live.cancel(); } catch (error) { $("say-error").textContent = error.message; }
  };
}

async function refreshClients(id) {
  try {
    const listed = await api("GET", `/v1/sessions/${id}/clients`);
    state.clients = new Map(listed.items.map((c) => [c.id, c]));
    for (const c of listed.items) state.names.set(c.id, c.name);
    renderClients();
  } catch { /* the stream shows what matters; the next refresh tries again */ }
}

function renderClients() {
  const clients = [...state.clients.values()];
  $("client-count").textContent = clients.length ? String(clients.length) : "";
  if (!clients.length) return $("clients").replaceChildren(el("p", { class: "note" }, "None."));
  $("clients").replaceChildren(...clients.map((c) => {
    let life = "never lapses";
    if (c.expires_at) {
      const left = Math.round((new Date(c.expires_at) - Date.now()) / 1000);
      life = left > 0 ? `ttl ${c.lifetime.data.seconds} s · lapses in ${left} s unless it pings` : "lapsing now";
    }
    return el("div", { class: "client", "data-client": c.name },
      el("div", {}, el("b", {}, c.name), " ", el("code", { class: "muted" }, short(c.id))),
      el("div", { class: "note" }, life),
      el("div", { class: "tools" }, c.tools.length ? c.tools.map((t) => t.name).join(", ") : "no tools"));
  }));
}

function approvalFor(server) {
  if (server?.startsWith("client:")) return `for client ${server.slice(7)}`;
  return server && server !== "builtin" ? `on the MCP server ${server}` : "on the server";
}

function renderApprovals() {
  const pending = [...state.approvals.values()];
  $("approval-count").textContent = pending.length ? String(pending.length) : "";
  $("approvals-panel").classList.toggle("empty", !pending.length);
  if (!pending.length) return $("approvals").replaceChildren(el("p", { class: "note" }, "None."));
  $("approvals").replaceChildren(...pending.map((a) => {
    const decide = async (decision) => {
      const body = decision === "allow" ? { decision } : { decision, message: prompt("Why deny? (the model reads this)") || null };
      decidedHere.add(a.call_id);
      try { await api("POST", `/v1/sessions/${live.sessionId}/approvals/${encodeURIComponent(a.call_id)}`, body); }
      catch (error) { alert(error.message); }
    };
    return el("div", { class: "approval", "data-call": a.call_id },
      el("div", {}, el("b", {}, a.tool), " ", el("span", { class: "muted" }, approvalFor(a.server))),
      el("div", { class: "mono" }, JSON.stringify(a.arguments)),
      el("div", { class: "actions" },
        el("button", { type: "button", onclick: () => decide("allow") }, "Allow"),
        el("button", { type: "button", class: "danger", onclick: () => decide("deny") }, "Deny")));
  }));
}

function callNode(call) {
  const node = el("div", { class: `call ${call.state}`, "data-call": call.id });
  call.node = node;
  paintCall(call);
  return node;
}

// Who a call is for, in words that read after its tool's name: "by web (…3fa2c1)", "for client web"
// (not sent yet: awaiting approval, say), "never sent to a client" (the server answered it: no such client
// or tool, arguments that do not fit, a denial), "on the server" (a server tool, or a call no tool has).
function whoOf(call) {
  if (call.clientId) return `by ${state.names.get(call.clientId) ?? "client"} (${short(call.clientId)})`;
  const client = call.server?.startsWith("client:") ? call.server.slice(7) : /^client__(.+?)__./.exec(call.name ?? "")?.[1];
  if (client) return call.doneAt || call.state === "denied" ? "never sent to a client" : `for client ${client}`;
  const grant = call.server && call.server !== "builtin" ? call.server : /^mcp__(.+?)__./.exec(call.name ?? "")?.[1];
  return grant ? `on the MCP server ${grant}` : "on the server";
}

function paintCall(call) {
  const who = whoOf(call);
  const timing = [
    call.ackedAt ? `ack ${ms(call.dispatchedAt, call.ackedAt)}` : "",
    call.doneAt ? `result ${ms(call.ackedAt ?? call.dispatchedAt ?? call.calledAt, call.doneAt)}` : "",
  ].filter(Boolean).join(" · ");
  call.node.className = `call ${call.state}`;
  call.node.replaceChildren(
    el("div", {}, el("span", { class: `state ${call.state}` }, call.state + (call.reason ? `: ${call.reason}` : "")), " ",
      el("b", {}, call.tool ?? call.name), " ", el("span", { class: "muted who" }, who),
      timing ? el("span", { class: "muted" }, ` · ${timing}`) : ""),
    el("div", { class: "mono" }, JSON.stringify(call.arguments ?? {})),
    call.decision ? el("div", { class: "muted decision" }, call.decision) : "",
    call.progress && !call.doneAt ? el("div", { class: "progress" }, progressText(call.progress)) : "",
    call.result !== undefined ? el("div", { class: "result" }, call.result) : "",
    ...(call.images ?? []).map((image) => el("img", { class: "result-image", alt: `${image.media_type} result`,
      onload: follow, src: `data:${image.media_type};base64,${image.data}` })),
    ...(call.audio ?? []).map((clip) => el("audio", { class: "result-audio", controls: "",
      src: `data:${clip.media_type};base64,${clip.data}` })),
    OPEN_STATES.has(call.state) ? el("button", { class: "cancel-call plain", onclick: () => cancelCall(call) }, "Cancel call") : "",
  );
}

// A call the run still waits for can be cancelled on its own; the run goes on.
const OPEN_STATES = new Set(["dispatched", "acked", "awaiting", "waiting"]);

function progressText(progress) {
  const parts = [];
  if (typeof progress.fraction === "number") parts.push(`${Math.round(progress.fraction * 100)}%`);
  if (progress.message) parts.push(progress.message);
  return `progress: ${parts.join(" · ") || "alive"}`;
}

async function cancelCall(call) {
  if (!confirm(`Cancel the call ${call.tool ?? call.name}? The run goes on without its result.`)) return;
  try {
    await api("POST", `/v1/sessions/${live.sessionId}/calls/${encodeURIComponent(call.id)}/cancel`, {});
  } catch (error) {
    $("say-error").textContent = error.message;
  }
}

function call(id) {
  if (!state.calls.has(id)) state.calls.set(id, { id, state: "called" });
  return state.calls.get(id);
}

function note(text) {
  $("transcript").append(el("p", { class: "note" }, text));
}

const SOURCES = { client: "user", steer: "user, while the run was going (steering it)", external: "posted on the user's behalf" };

// The transcript follows new entries while the reader is at its end; scrolled up, it stays put. The
// scroll event of toEnd's own move comes later, maybe after more entries: it is not the reader's.
let following = true;
let placed = 0;
$("transcript").addEventListener("scroll", () => {
  const box = $("transcript");
  if (Math.abs(box.scrollTop - placed) < 1) return;
  following = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
});
// Once a frame at most: a session's history arrives as many events at once.
let settling = 0;
const follow = () => {
  if (following && !settling) settling = requestAnimationFrame(() => { settling = 0; if (following) placed = toEnd($("transcript")); });
};
window.addEventListener("resize", follow);

function see(event) {
  const transcript = $("transcript");
  timeline.see(event);
  switch (event.type) {
    case "message_user":
      transcript.append(el("div", { class: "msg user" }, el("span", { class: "who" }, SOURCES[event.source] ?? "user"), textOf(event.message.content)));
      break;
    case "message_assistant": {
      const text = textOf(event.message.content);
      if (text) transcript.append(el("div", { class: "msg assistant" }, el("span", { class: "who" }, "assistant"), text));
      for (const block of event.message.content) {
        if (block.type !== "tool_call") continue;
        const c = call(block.data.id);
        Object.assign(c, { name: block.data.name, arguments: block.data.arguments, calledAt: event.created_at });
        transcript.append(callNode(c));
      }
      break;
    }
    case "client_tool_dispatched": {
      const c = call(event.call_id);
      Object.assign(c, { state: "dispatched", reason: undefined, clientId: event.client_id, tool: event.tool, arguments: event.arguments, dispatchedAt: event.created_at });
      if (c.node) paintCall(c);
      break;
    }
    case "client_tool_acked": {
      const c = call(event.call_id);
      Object.assign(c, { state: "acked", ackedAt: event.created_at });
      if (c.node) paintCall(c);
      break;
    }
    case "client_tool_failed": {
      const c = call(event.call_id);
      Object.assign(c, { state: "failed", reason: event.reason + (event.detail ? ` (${event.detail})` : "") });
      if (c.node) paintCall(c);
      break;
    }
    case "client_tool_waiting": {
      // Its client left (or stopped offering the tool): the call goes to the next `client_name` that offers it.
      const c = call(event.call_id);
      Object.assign(c, { state: "waiting", reason: `for ${event.client_name} until ${new Date(event.deadline).toLocaleString()}`, ackedAt: undefined });
      if (c.node) paintCall(c);
      break;
    }
    case "client_tool_progress": {
      const c = call(event.call_id);
      c.progress = { message: event.message, fraction: event.fraction };
      if (c.node) paintCall(c);
      break;
    }
    case "tool_result": {
      const c = call(event.call_id);
      if (c.state !== "failed" && c.state !== "denied") c.state = event.is_error ? "error" : "answered";
      const images = event.content.filter((b) => b.type === "image").map((b) => b.data);
      const audio = event.content.filter((b) => b.type === "audio").map((b) => b.data);
      const texts = event.content.map(blockText).filter((text) => text !== undefined);
      Object.assign(c, { result: texts.join("\n"), images, audio, doneAt: event.created_at });
      if (c.node) paintCall(c);
      break;
    }
    case "approval_requested": {
      const c = call(event.call_id);
      c.state = "awaiting";
      c.server = event.server;
      if (c.node) paintCall(c);
      state.approvals.set(event.call_id, event);
      renderApprovals();
      break;
    }
    case "approval_resolved": {
      const c = call(event.call_id);
      if (event.decision === "deny") Object.assign(c, { state: "denied", reason: event.deny_message ?? "" });
      else if (c.state === "awaiting") c.state = "allowed";
      const by = decidedHere.has(event.call_id) ? `you (${event.resolved_by})` : event.resolved_by ?? "someone";
      c.decision = `${event.decision === "deny" ? "denied" : "allowed"} by ${by}` +
        (event.remembered ? " (a decision remembered for this session)" : "") +
        (event.remember === "session" ? " · remembered for this session" : "") +
        (event.arguments ? ` · with ${JSON.stringify(event.arguments)}` : "");
      if (c.node) paintCall(c);
      state.approvals.delete(event.call_id);
      renderApprovals();
      break;
    }
    case "input_requested":
    case "input_provided":
      inputs.see(event);
      break;
    case "mcp_authorization_required":
    case "mcp_authorization_completed":
    case "mcp_authorization_declined":
      signIns.see(event);
      break;
    case "client_registered":
      state.names.set(event.client_id, event.name);
      note(`client ${event.name} (${short(event.client_id)}) registered with ${event.tools.length} tools`);
      if (live) refreshClients(live.sessionId);
      break;
    case "client_left":
      note(`client ${state.names.get(event.client_id) ?? short(event.client_id)} left (${event.reason === "timed_out" ? "lapsed: no ping in time" : "departed"})`);
      state.clients.delete(event.client_id);
      renderClients();
      break;
    case "client_tools_updated":
      note(`client ${state.names.get(event.client_id) ?? short(event.client_id)} now has ${event.tools.length} tools`);
      if (live) refreshClients(live.sessionId);
      break;
    case "run_started": state.running = true; note("run started"); break;
    case "run_completed": {
      state.running = false;
      const used = tokens(event.usage);
      note(used ? `run completed · ${used}` : "run completed");
      break;
    }
    case "run_cancelled": state.running = false; note("run cancelled"); break;
    case "run_failed": state.running = false; transcript.append(el("p", { class: "note", style: "color: var(--bad)" }, `run failed: ${event.error}`)); break;
    case "error": transcript.append(el("p", { class: "note", style: "color: var(--bad)" }, event.message)); break;
    default: break;
  }
  $("cancel").disabled = !state.running;
  follow();
}

$("say").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("say-form").requestSubmit(); }
});

route();

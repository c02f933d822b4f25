import { connect, pageTools } from "/sdk/switchboard.js";
import { readable, toEnd } from "/pages/transcript.js";

const $ = (id) => document.getElementById(id);
const AGENT_NAME = "Switchboard demo (scripted)";

// The same store and key name as the console (same origin), so "open in the console" lands signed in.
const KEY = "switchboard.key";

function apiKey() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("key");
  if (fromHash) {
    localStorage.setItem(KEY, fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return localStorage.getItem(KEY) ?? localStorage.getItem("switchboard.demo.key");
}

class Refused extends Error {}

async function admin(key, method, path, body) {
  const response = await fetch(path, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = await response.json().catch(() => null);
  const message = parsed?.error?.message ?? `${method} ${path}: ${response.status}`;
  // The key itself is wrong (or is not an API key): the person is asked for another.
  if (response.status === 401 || response.status === 403) throw new Refused(message);
  if (!response.ok) throw new Error(message);
  return parsed;
}

/** The workspace's demo agent, found by its name (the oldest, if there are several); made only if
 * there is none, so every browser and every tab of a workspace uses the same one. */
async function demoAgent(key) {
  let found = null;
  let after = "";
  while (!found) {
    const page = await admin(key, "GET", `/v1/agents?order=asc&limit=200${after ? `&after=${after}` : ""}`);
    found = page.items.find((agent) => agent.name === AGENT_NAME) ?? null;
    if (!page.next_cursor) break;
    after = page.next_cursor;
  }
  const agent = found ?? (await admin(key, "POST", "/v1/agents", { name: AGENT_NAME }));
  // One made by a tab that closed before it published a version gets its version here.
  const versions = found ? (await admin(key, "GET", `/v1/agents/${agent.id}/versions?limit=1`)).items : [];
  if (!versions.length) {
    const providers = (await admin(key, "GET", "/v1/model-providers")).items;
    const scripted = providers.find((p) => p.display_name === "Scripted");
    if (!scripted) throw new Error("this server has no Scripted model provider");
    await admin(key, "POST", `/v1/agents/${agent.id}/versions`, {
      model_provider_id: scripted.id,
      model: { format: "openai_responses", model: "scripted", max_tokens: 1000, context_window: 8000 },
      system_prompt: "The Switchboard demo.",
    });
  }
  return agent.id;
}

// The session this browser's demo opened last: a page opened without one in its URL joins it.
const LAST = "switchboard.demo.session";

/** Whether the session still takes its token (a new `switchboard up` on fresh data, a deleted session,
 * an expired token all say no). */
async function usable(id, token) {
  const response = await fetch(`/v1/sessions/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${token}` } });
  return response.ok;
}

// Every tab of one session shares it: the session is in the URL, its token in this browser's storage. A
// page opened without one (the link `switchboard up` printed, opened again or in a second tab) joins the
// session this browser opened last while it still works, so it joins as web-2; `?new` starts another.
async function session(key) {
  const params = new URLSearchParams(location.search);
  const named = params.get("session");
  const id = named ?? (params.has("new") ? null : localStorage.getItem(LAST));
  const token = id && localStorage.getItem(`switchboard.demo.token.${id}`);
  let found = null;
  if (id && token && (named || (await usable(id, token)))) {
    found = { id, token };
  } else {
    const created = await admin(key, "POST", "/v1/sessions", { agent_id: await demoAgent(key), display_name: "Demo" });
    localStorage.setItem(`switchboard.demo.token.${created.id}`, created.session_token);
    found = { id: created.id, token: created.session_token };
  }
  localStorage.setItem(LAST, found.id);
  params.delete("new");
  params.set("session", found.id);
  history.replaceState(null, "", `${location.pathname}?${params}`);
  return found;
}

function highlightRow({ row_id } = {}) {
  if (typeof row_id !== "string" && typeof row_id !== "number") throw new TypeError("row_id must be a string");
  const row = document.querySelector(`#rows tr[data-row-id="${CSS.escape(String(row_id))}"]`);
  if (!row) throw new Error(`there is no row ${row_id}; rows are 1 to 5`);
  document.querySelectorAll("#rows tr.highlighted").forEach((r) => r.classList.remove("highlighted"));
  row.classList.add("highlighted");
  row.scrollIntoView({ block: "center", behavior: "smooth" });
  return `row ${row_id} (${row.cells[1].textContent}) is highlighted`;
}

const names = new Map();

const following = (box) => box.scrollHeight - box.scrollTop - box.clientHeight < 40;

function line(kind, text, cls = "") {
  const box = $("transcript");
  const follow = following(box);
  const div = document.createElement("div");
  div.className = `ev ${cls}`;
  const k = document.createElement("span");
  k.className = "k";
  k.textContent = `${kind} `;
  div.append(k, document.createTextNode(text));
  box.append(div);
  if (follow) toEnd(box);
}

function textOf(content) {
  return (content ?? []).filter((b) => b.type === "text").map((b) => b.data.text).join("");
}

function show(event) {
  const who = (id) => names.get(id) ?? id;
  switch (event.type) {
    case "message_user": return line("you:", textOf(event.message.content));
    case "message_assistant": {
      const text = textOf(event.message.content);
      return text && line("agent:", text);
    }
    case "client_registered": names.set(event.client_id, event.name); return line("joined:", event.name);
    case "client_left": return line("left:", `${who(event.client_id)} (${event.reason})`);
    case "client_tool_dispatched": return line("call →", `${who(event.client_id)}.${event.tool} ${JSON.stringify(event.arguments)}`);
    case "client_tool_failed": return line("call failed:", `${who(event.client_id)} ${event.reason}`, "error");
    case "approval_requested": return line("waiting:", `${event.tool} needs approval; decide in the console`);
    case "tool_result": {
      // A result's blocks (its text, and a text naming each image) one after another.
      const parts = event.content.filter((b) => b.type === "text").map((b) => readable(b.data.text));
      return line(event.is_error ? "error ←" : "result ←", parts.join(" "), event.is_error ? "error" : "");
    }
    case "run_failed": return line("run failed:", event.error, "error");
    default: return undefined;
  }
}

function setStatus(status) {
  $("status").textContent = status;
  $("conn-pill").className = `pill ${status}`;
}

async function start(key) {
  setStatus("connecting");
  $("conn-pill").classList.remove("hidden");
  const { id, token } = await session(key);
  $("signin").classList.add("hidden");
  $("app").classList.remove("hidden");
  $("intro").classList.remove("hidden");
  $("session-id").textContent = id;
  $("who").classList.remove("hidden");
  $("console-link").href = `/console#session=${id}`;
  $("console-link").classList.remove("hidden");
  $("new-session").classList.remove("hidden");
  const live = connect({ sessionId: id, token, history: true });
  live.on("status", setStatus);
  live.on("*", show);
  await live.ready();
  setStatus("open");
  const ttl = Number(new URLSearchParams(location.search).get("ttl")) || 30;
  const tab = await live.registerClient({ name: "web", ttl, tools: {
    ...pageTools({ root: $("content") }),
    highlight_row: {
      description: "Highlight one invoice row in the table by its row number.",
      parameters: { type: "object", properties: { row_id: { type: "string" } }, required: ["row_id"] },
      execute: highlightRow,
    },
  } });
  const named = (client) => {
    $("client-name").textContent = client.name;
    document.body.dataset.client = client.name;
    document.body.dataset.clientId = client.id;
  };
  named(tab);
  tab.onRegistered = named;
  const n = tab.name;
  const fill = (customer) =>
    `/call client__${n}__fill_form {"fields": [{"label": "Customer", "value": "${customer}"}, {"name": "tone", "value": "firm"}]}`;
  // Calls of one turn run side by side, so "Both at once" pairs two that do not depend on each other;
  // "Send reminder" clicks the form's button (its result says so if the form is not filled in yet).
  const examples = {
    "Highlight row 2": `/call client__${n}__highlight_row {"row_id": "2"}`,
    "Fill the form": fill("Kenji Mori"),
    "Send reminder": `/call client__${n}__click {"text": "Send reminder"}`,
    "Read the page": `/call client__${n}__read_page {"max_chars": 300}`,
    "Both at once": `/call client__${n}__highlight_row {"row_id": "4"}\n${fill("Omar Haddad")}`,
    "Just talk": "Hello there",
  };
  for (const [label, text] of Object.entries(examples)) {
    const button = document.createElement("button");
    button.className = "plain";
    button.type = "button";
    button.textContent = label;
    button.onclick = () => { $("say").value = text; };
    $("examples").append(button);
  }
  $("ask").onsubmit = async (event) => {
    event.preventDefault();
    const text = $("say").value.trim();
    if (!text) return;
    $("say").value = "";
    try { await live.send(text); } catch (error) { line("error:", error.message, "error"); }
  };
  window.switchboardDemo = { live, tab };
}

$("say").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("ask").requestSubmit(); }
});

window.addEventListener("resize", () => { if (following($("transcript"))) toEnd($("transcript")); });

// Where the chat sits over the bottom of the screen (narrow screens), what a tool scrolls into view
// stops above it, not under it.
new ResizeObserver(() => {
  const over = getComputedStyle($("chat")).position === "sticky";
  document.documentElement.style.scrollPaddingBottom = over ? `${$("chat").offsetHeight + 8}px` : "";
}).observe($("chat"));

$("reminder").onsubmit = (event) => {
  event.preventDefault();
  const data = new FormData(event.target);
  $("submitted").textContent = `Reminder for ${data.get("customer")} (${data.get("tone")}) sent.`;
  $("submitted").scrollIntoView({ block: "nearest", behavior: "smooth" });
};

function signIn(message = "") {
  $("conn-pill").classList.add("hidden");
  $("signin").classList.remove("hidden");
  $("signin-error").textContent = message;
  $("signin-form").onsubmit = (event) => {
    event.preventDefault();
    localStorage.setItem(KEY, new FormData(event.target).get("key").trim());
    location.reload();
  };
}

const key = apiKey();
if (key) {
  start(key).catch((error) => {
    if (!(error instanceof Refused)) {
      setStatus("failed");
      $("problem").textContent = `The demo could not start: ${error.message}`;
      return $("problem").classList.remove("hidden");
    }
    // A stored key the server no longer takes (a new `switchboard up`, another server): ask again.
    localStorage.removeItem(KEY);
    localStorage.removeItem("switchboard.demo.key");
    signIn(`The server refused the key: ${error.message}`);
  });
} else {
  signIn();
}

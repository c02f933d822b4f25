// Switchboard browser SDK: an ES module with no dependencies, served at /sdk/switchboard.js.
//
//   import { connect, pageTools } from "https://switchboard.example/sdk/switchboard.js";
//   const session = connect({ sessionId, token });             // or getToken: async () => "swb_st_..."
//   session.on("*", (event) => render(event));                // every event of the session, in order
//   const tab = await session.registerClient({ name: "web", ttl: 60, tools: { ...pageTools(), highlight_row } });
//   await session.send("Highlight the overdue rows");
//
// The stream runs over fetch (EventSource cannot send Authorization), resumes with Last-Event-ID after a
// drop and backs off as the Subako SDK does. Each registered client acks its calls at once, runs the
// tool, and answers; a throw or a value JSON cannot carry becomes an error result. A client pings at
// ttl/2, registers again if the server lost it (a ping 404), and leaves when the page is hidden for good.
//
// A tool is {description, parameters, timeout_s?, heartbeat_s?, execute(args, call)}; `call` holds
// `callId`, `client`, `signal` (aborted when the call fails while it runs: cancelled, timed out, its run
// gone), `progress(message, fraction)`, and `ask(message, schema)` / `askUrl(message, url)`, which ask the
// person (an input request) and resolve to `{action, content}` once answered. `execute` returns a string,
// any JSON value, or `{content: [{type: "text", text}, {type: "image", media_type, data}], is_error?}` for a
// result with images.
//
//   await session.send("What is on screen?", { clientTools: { look: { description, parameters, execute } } });

import { InputAnswers, pausableDeadline } from "./input-requests.js";

const RESULT_TIMEOUT_MS = 290_000;
const MAX_RESULT_CHARS = 65_536;
const KEEPALIVE_LIMIT = 60_000;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** An error the server answered, with its status and envelope code. */
export class SwitchboardError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "SwitchboardError";
    this.status = status;
    this.code = code;
  }
}

function retryAfterMs(response) {
  const value = response.headers.get("retry-after");
  if (value && /^\d+$/.test(value)) return Math.min(Number(value) * 1000, 60_000);
  return null;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The page's span of a call from its `traceCall` hook, or the dispatched traceparent passed through (no
 * hook, or a hook that threw or gave no traceparent). `end(error)` is called once, when the call is over:
 * `error` null, or why it went wrong (`tool_error`, `cancelled`, `refused`, `ack_failed`).
 */
function callSpan(traceCall, event, dispatched) {
  const through = { traceparent: dispatched, end() {} };
  if (!traceCall) return through;
  let made;
  try {
    made = traceCall({ tool: event.tool, callId: event.call_id, traceparent: dispatched });
  } catch (error) {
    console.warn("switchboard: traceCall failed; the call's traceparent is passed through", error);
    return through;
  }
  const traceparent = typeof made?.traceparent === "string" && TRACEPARENT.test(made.traceparent) ? made.traceparent : dispatched;
  const end = (error) => {
    try {
      made?.end?.(error);
    } catch (failure) {
      console.warn("switchboard: a call span's end failed", failure);
    }
  };
  return { traceparent, end };
}

function backoffMs(attempt) {
  return Math.min(500 * 2 ** attempt, 8000) * (1 + Math.random() * 0.25);
}

/**
 * Open a session's live event stream. `token` (a session token or API key) or `getToken` (called again
 * after a 401); `url` defaults to this page's origin; `history: true` replays the whole log first;
 * `include` (such as "progress,images") asks for the extensions the default view leaves out;
 * `traceCall` (optional): this page's own span of each call it runs, from a tracer of the page's
 * (`traceCall({ tool, callId, traceparent })` returns `{ traceparent, end(error) }`, see
 * docs/observability.md): its `traceparent` is what the call's ack, progress and result carry.
 */
export function connect(options) {
  return new Connection(options);
}

export class Connection {
  constructor({ sessionId, token, getToken, url, history = false, maxReconnects = Infinity, include = "", traceCall = null }) {
    if (!sessionId) throw new TypeError("connect: sessionId is required");
    if (!token && !getToken) throw new TypeError("connect: give token or getToken");
    this.sessionId = sessionId;
    this.url = (url ?? globalThis.location?.origin ?? "").replace(/\/$/, "");
    this.status = "connecting";
    this.lastSeq = 0;
    this._history = history;
    this._include = Array.isArray(include) ? include.join(",") : include;
    this._token = token ?? null;
    this._getToken = getToken ?? null;
    this._maxReconnects = maxReconnects;
    this._traceCall = typeof traceCall === "function" ? traceCall : null;
    this._listeners = new Map();
    this._clients = new Set();
    // Dispatches no client of this connection claimed yet (a per-turn client's, before send() returns).
    this._unclaimed = [];
    this._abort = new AbortController();
    this._ready = new Promise((resolve, reject) => {
      this._opened = resolve;
      this._failedToOpen = reject;
    });
    this._ready.catch(() => {});
    this._run();
  }

  /** Resolves once the stream is open (and rejects if it never opens). */
  ready() {
    return this._ready;
  }

  /** Listen to events of one type, or "*" for all, and "status" for connection status changes. */
  on(type, listener) {
    if (!this._listeners.has(type)) this._listeners.set(type, new Set());
    this._listeners.get(type).add(listener);
    return () => this._listeners.get(type)?.delete(listener);
  }

  _emit(type, value) {
    for (const listener of [...(this._listeners.get(type) ?? []), ...(type === "status" ? [] : this._listeners.get("*") ?? [])]) {
      try {
        listener(value);
      } catch (error) {
        console.error("switchboard: a listener failed", error);
      }
    }
  }

  _setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    this._emit("status", status);
  }

  async _authorization(renew) {
    if (this._getToken && (renew || !this._token)) this._token = await this._getToken();
    return `Bearer ${this._token}`;
  }

  /** A request to the API: JSON in and out, retried as the Subako SDK retries, one Idempotency-Key per call. */
  async request(method, path, { body, keepalive = false, headers = {} } = {}) {
    const key = method === "GET" ? null : uuid();
    let renewed = false;
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        const init = {
          method,
          keepalive,
          headers: {
            Authorization: await this._authorization(false),
            ...(key ? { "Idempotency-Key": key } : {}),
            ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
            ...headers,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        };
        response = await fetch(this.url + path, init);
      } catch (error) {
        if (attempt >= 2 || keepalive) throw error;
        await sleep(backoffMs(attempt));
        continue;
      }
      if (response.status === 401 && this._getToken && !renewed) {
        renewed = true;
        await this._authorization(true);
        attempt--;
        continue;
      }
      if ((response.status >= 500 || response.status === 408 || response.status === 429) && attempt < 2) {
        await sleep(retryAfterMs(response) ?? backoffMs(attempt));
        continue;
      }
      const text = await response.text();
      const parsed = text ? JSON.parse(text) : null;
      if (!response.ok) {
        const error = parsed?.error ?? {};
        throw new SwitchboardError(response.status, error.code ?? "unknown", error.message ?? response.statusText);
      }
      return parsed;
    }
  }

  /**
   * Post a user message: it starts a run, or steers the active one (the agent's concurrency policy).
   * `clientTools` ({name: tool}, as for registerClient) are offered for that run only; this connection
   * serves their calls with the same `execute` contract until the run ends.
   */
  async send(text, { clientTools = null } = {}) {
    const body = { type: "input", text };
    if (clientTools && Object.keys(clientTools).length) body.client_tools = declarations(clientTools);
    const outcome = await this.request("POST", `/v1/sessions/${this.sessionId}/events`, { body });
    if (outcome?.client_id && clientTools) {
      const client = new ToolClient(this, "turn", 0, clientTools);
      client._serveScoped(outcome.client_id.toLowerCase());
      this._clients.add(client);
      // Calls of this run dispatched before the answer came back.
      const early = this._unclaimed.filter((event) => event.client_id === client.id);
      this._unclaimed = this._unclaimed.filter((event) => event.client_id !== client.id);
      for (const event of early) client._see(event);
    }
    return outcome;
  }

  /** Cancel the active run. */
  cancel() {
    return this.request("POST", `/v1/sessions/${this.sessionId}/cancel`, { body: {} });
  }

  /**
   * Call `listener(signIn)` each time the session asks the person to sign in to an OAuth grant's MCP server
   * (`mcp_authorization_required`, an extension: connect with `include` naming "extensions"). `signIn` holds
   * `authorizationId`, `grant`, `serverUrl`, `authorizationUrl` (the page to open in a new tab; null when the
   * event's is not an http(s) address, so a hostile one is never a link), `expiresAt`, `event`, and
   * `decline()`. Returns a function that stops listening.
   */
  onAuthorizationRequired(listener) {
    return this.on("mcp_authorization_required", (event) => listener(askedSignIn(this, event)));
  }

  /**
   * Call `listener(ended)` each time a sign-in ends: `ended` holds `authorizationId`, `grant`, `serverUrl`,
   * `state` ("completed", "declined" or "expired") and `event`. Returns a function that stops listening.
   */
  onAuthorizationEnded(listener) {
    const stops = SIGN_IN_ENDINGS.map((type) => this.on(type, (event) => listener(endedSignIn(event))));
    return () => stops.forEach((stop) => stop());
  }

  /** Decline a sign-in the session asked for: the step goes on without the grant's tools. */
  declineAuthorization(authorizationId) {
    const id = encodeURIComponent(authorizationId);
    return this.request("POST", `/v1/sessions/${this.sessionId}/mcp-authorizations/${id}/decline`);
  }

  /** Register a client with `tools` ({name: {description, parameters, execute(args, call)}}). */
  async registerClient({ name, ttl = 60, tools = {} }) {
    const client = new ToolClient(this, name, ttl, tools);
    this._clients.add(client);
    await client._register();
    return client;
  }

  /** Stop streaming and leave every client of this connection. */
  async close() {
    await Promise.allSettled([...this._clients].map((client) => client.leave()));
    this._abort.abort();
    this._setStatus("closed");
  }

  async _run() {
    let quiet = 0;
    let base = 3000;
    let renewed = false;
    while (!this._abort.signal.aborted) {
      let sawEvent = false;
      try {
        const params = new URLSearchParams();
        if (this.lastSeq > 0 || this._history) params.set("after_seq", String(this.lastSeq));
        if (this._include) params.set("include", this._include);
        const headers = { Authorization: await this._authorization(false), Accept: "text/event-stream" };
        if (this.lastSeq > 0) headers["Last-Event-ID"] = String(this.lastSeq);
        const response = await fetch(`${this.url}/v1/sessions/${this.sessionId}/events/stream?${params}`, {
          headers,
          signal: this._abort.signal,
        });
        if (response.status === 401 && this._getToken && !renewed) {
          renewed = true;
          await this._authorization(true);
          continue;
        }
        if (!response.ok) {
          const error = (await response.json().catch(() => ({})))?.error ?? {};
          const failure = new SwitchboardError(response.status, error.code ?? "unknown", error.message ?? "stream refused");
          // 404 is the server ending the session for good; other refusals will not change on a retry.
          if (response.status < 500 && response.status !== 408 && response.status !== 429) return this._fail(failure);
          throw failure;
        }
        renewed = false;
        this._setStatus("open");
        this._opened();
        for await (const frame of frames(response.body)) {
          if (frame.retry !== null) base = frame.retry;
          if (frame.id !== null && frame.data === null) {
            this.lastSeq = Math.max(this.lastSeq, Number(frame.id));
            continue;
          }
          if (frame.data === null) continue;
          const event = JSON.parse(frame.data);
          if (typeof event.seq === "number") {
            if (event.seq <= this.lastSeq) continue;
            this.lastSeq = event.seq;
            sawEvent = true;
            quiet = 0;
          }
          this._deliver(event);
        }
      } catch (error) {
        if (this._abort.signal.aborted) return;
        if (error instanceof SwitchboardError && error.status < 500) return this._fail(error);
      }
      if (this._abort.signal.aborted) return;
      quiet = sawEvent ? 1 : quiet + 1;
      if (quiet > this._maxReconnects) return this._fail(new Error(`the stream was lost after ${quiet - 1} reconnects`));
      this._setStatus("reconnecting");
      await sleep(Math.min(base * 2 ** (quiet - 1), 30_000));
    }
  }

  _fail(error) {
    this.error = error;
    this._setStatus("failed");
    this._failedToOpen(error);
    for (const client of this._clients) client._stop();
  }

  _deliver(event) {
    for (const client of this._clients) client._see(event);
    if (event.type === "client_tool_dispatched" && ![...this._clients].some((client) => client.id === event.client_id)) {
      this._unclaimed.push(event);
      if (this._unclaimed.length > 200) this._unclaimed.shift();
    }
    this._emit(event.type, event);
  }
}

const SIGN_IN_ENDINGS = ["mcp_authorization_completed", "mcp_authorization_declined"];

/** `url` when it is an absolute http(s) URL, else null. */
function httpUrl(url) {
  if (typeof url !== "string") return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function askedSignIn(connection, event) {
  return {
    authorizationId: event.authorization_id,
    grant: event.grant,
    serverUrl: event.server_url,
    authorizationUrl: httpUrl(event.authorization_url),
    expiresAt: event.expires_at,
    event,
    decline: () => connection.declineAuthorization(event.authorization_id),
  };
}

function endedSignIn(event) {
  let state = "completed";
  // A decline, or the wait running out; a reason this SDK does not know reads as a decline.
  if (event.type === "mcp_authorization_declined") state = event.reason === "expired" ? "expired" : "declined";
  return { authorizationId: event.authorization_id, grant: event.grant, serverUrl: event.server_url, state, event };
}

/** The frames of an SSE body: {id, data, retry} (null where the frame had none). */
async function* frames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let frame = { id: null, data: null, retry: null };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) !== -1) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        if (line === "") {
          if (frame.id !== null || frame.data !== null || frame.retry !== null) yield frame;
          frame = { id: null, data: null, retry: null };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") frame.data = frame.data === null ? value : `${frame.data}\n${value}`;
        else if (field === "id") frame.id = value;
        else if (field === "retry" && /^\d+$/.test(value)) frame.retry = Number(value);
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function declarations(tools) {
  return Object.entries(tools).map(([name, tool]) => ({
    name,
    description: tool.description ?? "",
    parameters: tool.parameters ?? { type: "object" },
    ...(tool.timeout_s ? { timeout_s: tool.timeout_s } : {}),
    ...(tool.heartbeat_s ? { heartbeat_s: tool.heartbeat_s } : {}),
    ...(tool.on_leave ? { on_leave: tool.on_leave } : {}),
    ...(tool.task_support ? { task_support: tool.task_support } : {}),
    ...(tool.asks_first ? { asks_first: true } : {}),
  }));
}

/** What a tool returned, as the body of its result: text, or content blocks (images, audio, resources, links)
 * and its structured content as they are. */
function resultBody(value) {
  if (value && typeof value === "object" && Array.isArray(value.content)) {
    const structured = value.structured && typeof value.structured === "object" ? { structured: value.structured } : {};
    return { content: value.content, ...structured, ...(value.is_error ? { is_error: true } : {}) };
  }
  const text = resultText(value);
  if (text.length > MAX_RESULT_CHARS) {
    return { text: `the tool's answer was not valid: over ${MAX_RESULT_CHARS} characters`, is_error: true };
  }
  return { text };
}

function resultText(value) {
  if (typeof value === "string") return value;
  if (value === undefined) return "done";
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError("the tool's answer is not JSON");
  return text;
}

export class ToolClient {
  constructor(connection, name, ttl, tools) {
    this.connection = connection;
    this.requestedName = name;
    this.ttl = ttl;
    this.tools = { ...tools };
    this.id = null;
    this.name = null;
    this.status = "joining";
    this._early = [];
    this._running = new Set();
    // The calls being executed, by call id: a failure of one aborts its signal.
    this._calls = new Map();
    // The answers to the input requests its calls make.
    this._answers = new InputAnswers(connection);
    this._scoped = false;
    this._toolsUpdate = Promise.resolve();
    this._pinging = null;
    this._reregistering = false;
    /** Called with the client after it registered again under a new id (and maybe a new name). */
    this.onRegistered = null;
    this._onPageHide = (event) => {
      if (!event.persisted) this._leaveOnUnload();
    };
  }

  get _path() {
    return `/v1/sessions/${this.connection.sessionId}/clients`;
  }

  async _register() {
    this.status = "joining";
    const lifetime = this.ttl ? { type: "ttl", data: { seconds: this.ttl } } : { type: "never" };
    const body = { name: this.requestedName, lifetime, tools: declarations(this.tools) };
    let registered;
    try {
      registered = await this.connection.request("POST", this._path, { body });
    } catch (error) {
      this.status = "failed";
      throw error;
    }
    this.id = registered.id.toLowerCase();
    this.name = registered.name;
    this.status = "serving";
    globalThis.addEventListener?.("pagehide", this._onPageHide);
    if (this.ttl) this._schedulePing();
    const early = this._early;
    this._early = [];
    for (const event of early) this._see(event);
  }

  /** Serve a run-scoped registration the server made for send()'s clientTools (it ends with the run). */
  _serveScoped(id) {
    this.id = id;
    this.name = "turn";
    this._scoped = true;
    this.status = "serving";
  }

  async _registerAgain() {
    if (this._scoped) return;
    if (this._reregistering || this.connection.status === "failed" || this.connection.status === "closed") return;
    this._reregistering = true;
    try {
      await this._register();
      this.onRegistered?.(this);
    } catch (failure) {
      console.error("switchboard: could not register again", failure);
    } finally {
      this._reregistering = false;
    }
  }

  _schedulePing() {
    clearTimeout(this._pinging);
    this._pinging = setTimeout(() => this._ping(), (this.ttl * 1000) / 2);
  }

  async _ping() {
    if (this.status !== "serving") return;
    try {
      await this.connection.request("POST", `${this._path}/${this.id}/ping`);
    } catch (error) {
      if (error instanceof SwitchboardError && error.status === 404) {
        // The server lost this registration (it lapsed while the tab slept, say): register again.
        this._stop();
        await this._registerAgain();
        return;
      }
      console.warn("switchboard: ping failed; trying again next tick", error);
    }
    if (this.status === "serving") this._schedulePing();
  }

  _see(event) {
    if (this.status === "joining") {
      if (event.type === "client_tool_dispatched") this._early.push(event);
      return;
    }
    if (this.status !== "serving" || event.client_id !== this.id) return;
    if (event.type === "client_tool_dispatched") {
      const handling = this._handle(event);
      this._running.add(handling);
      handling.finally(() => this._running.delete(handling));
    } else if (event.type === "input_provided") {
      this._answers.heard(event);
    } else if (event.type === "client_tool_failed") {
      this._calls.get(event.call_id)?.abort(new Error(`the call failed: ${event.reason}${event.detail ? ` (${event.detail})` : ""}`));
    } else if (event.type === "client_left") {
      this._stop();
      if (this._scoped) this.connection._clients.delete(this);
      // Lapsed while this page was alive (a sleeping laptop, a throttled background tab): serve again.
      // Left on purpose (a DELETE by the app or an operator): stay gone.
      if (event.reason === "timed_out") this._registerAgain();
    }
  }

  async _handle(event) {
    const dispatched = typeof event.traceparent === "string" ? event.traceparent : null;
    const span = callSpan(this.connection._traceCall, event, dispatched);
    let failed = null;
    try {
      failed = await this._serveCall(event, span.traceparent);
    } finally {
      span.end(failed);
    }
  }

  /** Ack, run and answer one call; what went wrong, for the page's span of it (null: nothing). */
  async _serveCall(event, traceparent) {
    const calls = `${this._path}/${event.client_id}/calls/${encodeURIComponent(event.call_id)}`;
    // A traced deployment's call span, or the page's own span of the call (docs/observability.md): the
    // answers' request spans are made its children, and a tool that traces its work makes its own span a
    // child of it (call.traceparent).
    const headers = traceparent ? { traceparent } : {};
    try {
      await this.connection.request("POST", `${calls}/ack`, { headers });
    } catch (error) {
      console.warn(`switchboard: ack of ${event.call_id} failed; leaving it to the server's deadline`, error);
      return "ack_failed";
    }
    let answer;
    const tool = this.tools[event.tool];
    const controller = new AbortController();
    this._calls.set(event.call_id, controller);
    const deadline = pausableDeadline(RESULT_TIMEOUT_MS);
    const ask = (body, key) =>
      this._ask(calls, controller.signal, deadline, key === undefined ? body : { ...body, key });
    const call = {
      callId: event.call_id,
      client: this,
      signal: controller.signal,
      traceparent,
      /** Tell the session how far the call is; keeps a tool with heartbeat_s alive. */
      progress: (message, fraction) => {
        const body = {};
        if (message !== undefined && message !== null) body.message = String(message);
        if (fraction !== undefined && fraction !== null) body.fraction = fraction;
        return this.connection.request("POST", `${calls}/progress`, { body, headers });
      },
      /** Ask the person to fill in a form (MCP's requestedSchema); resolves to {action, content}. */
      ask: (message, schema, { key } = {}) => ask({ message, schema }, key),
      /** Send the person to a page (URL mode); resolves to {action, content: null}. */
      askUrl: (message, url, { key } = {}) => ask({ message, url }, key),
    };
    if (!tool) {
      answer = { text: `no tool named ${event.tool} is served here`, is_error: true };
    } else {
      try {
        const value = await Promise.race([
          Promise.resolve().then(() => tool.execute(event.arguments ?? {}, call)),
          deadline.expired,
        ]);
        answer = resultBody(value);
      } catch (error) {
        answer = { text: String(error?.message ?? error) || "the tool failed", is_error: true };
      }
    }
    deadline.clear();
    this._calls.delete(event.call_id);
    // The call failed while it ran: the server no longer takes a result for it.
    if (controller.signal.aborted || this.status !== "serving") return "cancelled";
    // Tool changes the handler made reach the server before its result does (the navigation rule).
    await this._toolsUpdate.catch(() => {});
    const size = JSON.stringify(answer).length;
    try {
      await this.connection.request("POST", `${calls}/result`, { body: answer, keepalive: size < KEEPALIVE_LIMIT, headers });
    } catch (error) {
      console.error(`switchboard: the result of ${event.call_id} was refused`, error);
      return "refused";
    }
    return answer.is_error ? "tool_error" : null;
  }

  /** Post an input request for a call this client runs, and wait for its answer. */
  async _ask(calls, signal, deadline, body) {
    signal.throwIfAborted();
    const asked = await this.connection.request("POST", `${calls}/input-requests`, { body });
    deadline.pause();
    try {
      return await this._answers.of(asked.request_id, signal);
    } finally {
      deadline.resume();
    }
  }

  /** Replace the whole tool set; resolves once the server has it. */
  setTools(tools) {
    this.tools = { ...tools };
    const body = { tools: declarations(this.tools) };
    this._toolsUpdate = this._toolsUpdate
      .catch(() => {})
      .then(() => this.connection.request("PUT", `${this._path}/${this.id}/tools`, { body }));
    return this._toolsUpdate;
  }

  _stop() {
    this.status = "left";
    clearTimeout(this._pinging);
    globalThis.removeEventListener?.("pagehide", this._onPageHide);
  }

  _leaveOnUnload() {
    if (this.status !== "serving") return;
    this._stop();
    // keepalive lets the DELETE outlive the page; the token is already resolved (no await on unload).
    fetch(`${this.connection.url}${this._path}/${this.id}`, {
      method: "DELETE",
      keepalive: true,
      headers: { Authorization: `Bearer ${this.connection._token}`, "Idempotency-Key": uuid() },
    }).catch(() => {});
  }

  /** Leave: the name is freed and calls still owed fail with client_gone. */
  async leave() {
    if (this.status === "left" || this.id === null) return;
    this._stop();
    this.connection._clients.delete(this);
    await this.connection.request("DELETE", `${this._path}/${this.id}`);
  }
}

export { pageTools } from "./page-tools.js";

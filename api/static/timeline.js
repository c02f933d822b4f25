// A run's timeline (served at /pages/timeline.js): its model steps, its tool calls and the waits within
// them (an approval, a client's ack, an input request, a client gone), each with when it began and ended,
// computed from the session's events alone; and the link to the run's trace. No DOM here
// (timeline-view.js draws it).
//
// Times are microseconds since the epoch on the log's clock: every `created_at` is stamped by Redis as the
// event is appended, so events written by different API processes and workers line up. A step's own
// `started_at_us` is the worker's clock; its timing event's `created_at` (the step's commit) less its
// `step_ms` is used instead.

import { tokens } from "./transcript.js";

const ISO = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z$/;

/** An event's `created_at` ("2026-12-06T15:16:58.140480Z") in microseconds since the epoch, or null. */
export function parseTime(iso) {
  const match = typeof iso === "string" ? ISO.exec(iso) : null;
  if (!match) return null;
  const seconds = Date.parse(`${match[1]}Z`);
  if (!Number.isFinite(seconds)) return null;
  return seconds * 1000 + Number((match[2] ?? "").padEnd(6, "0").slice(0, 6));
}

/** A duration in microseconds as a person reads it: "0.4 ms", "12 ms", "1.25 s", "2 min 5 s", "3 h 2 min",
 * "2 d 3 h". */
export function durationText(us) {
  const ms = Math.max(0, us) / 1000;
  if (ms < 10) return `${Math.round(ms * 10) / 10} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${Math.round(s * 100) / 100} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  if (whole < 86400) return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
  return `${Math.floor(whole / 86400)} d ${Math.floor((whole % 86400) / 3600)} h`;
}

// W3C trace context: 32 lowercase hex digits, not all zero. Anything else on an event is ignored, so what a
// log line carries never shapes a URL beyond the id's place in the template.
const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;

/** `value` if it is a valid trace id, else null. */
export function traceIdOf(value) {
  return typeof value === "string" && TRACE_ID.test(value) ? value : null;
}

/** The trace UI's address of a run: `template` (the deployment's SWITCHBOARD_TRACE_URL_TEMPLATE, such as
 * `http://jaeger:16686/trace/{trace_id}`) with the id in place of `{trace_id}`; null without a template, a
 * valid id, or an http(s) result. */
export function traceLink(template, traceId) {
  const id = traceIdOf(traceId);
  if (id === null || typeof template !== "string" || !template.includes("{trace_id}")) return null;
  let url;
  try {
    url = new URL(template.replaceAll("{trace_id}", id));
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

// Runs kept: the oldest go first, with their calls, so a long session's console holds a bounded model.
export const MAX_RUNS = 50;
const ENDS = { run_completed: "completed", run_failed: "failed", run_cancelled: "cancelled" };

function kindOf(name) {
  if (typeof name !== "string") return "server";
  if (name.startsWith("client__")) return "client";
  if (name.startsWith("mcp__")) return "mcp";
  return "server";
}

/** Folds a session's events, in log order, into its runs: `add(event)` each, `runs()` the runs oldest
 * first. A run is `{runId, queuedAt, start, end, outcome, error, traceId, usage, rows}`; `outcome` is
 * queued, running, completed, failed or cancelled; `rows` are its steps (`kind: "step"`) and calls (`kind`
 * client, server or mcp, with `children`: the waits within the call, `kind` approval, ack, client, input
 * or client_wait), each `{kind, label, detail, state, start, end}` with `end` null while it lasts. Calls no
 * run made (an MCP client's of the session) are not a run's and are left out. */
export class Timeline {
  constructor() {
    this._runs = new Map();
    this._calls = new Map();
    this._names = new Map();
    // Per run: since when the model has been working on a step not yet committed (null: it is not).
    this._model = new Map();
    this._current = null;
    this._seq = -1;
    // The latest instant of the log seen: an open row is drawn at least this far, whatever the page's clock.
    this.latest = null;
  }

  runs() {
    return [...this._runs.values()];
  }

  /** Since when the run's model has been on a step that has not committed yet, or null. */
  modelSince(runId) {
    return this._model.get(runId)?.since ?? null;
  }

  /** The number the run's next step will have. */
  nextStep(runId) {
    return this._model.get(runId)?.next ?? 0;
  }

  add(event) {
    const at = parseTime(event?.created_at);
    if (at === null) return;
    // Each event is folded once, however often it is handed in (a log read again over what a stream gave).
    if (typeof event.seq === "number") {
      if (event.seq <= this._seq) return;
      this._seq = event.seq;
    }
    this.latest = Math.max(this.latest ?? at, at);
    switch (event.type) {
      case "client_registered": this._names.set(event.client_id, event.name); return undefined;
      case "run_queued": return this._queued(event, at);
      case "run_started": return this._started(event, at);
      case "custom": return this._step(event, at);
      case "message_assistant": return this._committed();
      case "tool_call": return this._called(event, at);
      case "approval_requested": return this._approvalRequested(event, at);
      case "approval_resolved": return this._approvalResolved(event, at);
      case "client_tool_dispatched": return this._dispatched(event, at);
      case "client_tool_acked": return this._acked(event, at);
      case "client_tool_waiting": return this._waiting(event, at);
      case "input_requested": return this._inputRequested(event, at);
      case "input_provided": return this._inputProvided(event, at);
      case "client_tool_failed": return this._failed(event, at);
      case "tool_result": return this._result(event, at);
      case "run_completed": case "run_failed": case "run_cancelled": return this._ended(event, at);
      default: return undefined;
    }
  }

  _run(runId) {
    let run = this._runs.get(runId);
    if (!run) {
      run = { runId, queuedAt: null, start: null, end: null, outcome: "queued", error: null, traceId: null, usage: null, rows: [] };
      this._runs.set(runId, run);
      this._model.set(runId, { since: null, next: 0 });
      this._trim();
    }
    return run;
  }

  _trim() {
    while (this._runs.size > MAX_RUNS) {
      const [oldest] = this._runs.keys();
      const run = this._runs.get(oldest);
      for (const row of run.rows) this._calls.delete(row.id);
      this._runs.delete(oldest);
      this._model.delete(oldest);
      if (this._current === run) this._current = null;
    }
  }

  _traced(run, event) {
    run.traceId ??= traceIdOf(event.trace_id);
  }

  _queued(event, at) {
    const run = this._run(event.run_id);
    run.queuedAt ??= at;
    this._traced(run, event);
  }

  _started(event, at) {
    const run = this._run(event.run_id);
    Object.assign(run, { start: at, outcome: "running" });
    this._traced(run, event);
    this._model.get(run.runId).since = at;
    this._current = run;
  }

  _step(event, at) {
    const payload = event.kind === "timing" ? event.payload : null;
    if (payload?.scope !== "step" || typeof payload.step_ms !== "number" || !Number.isInteger(payload.step)) return;
    const run = this._runs.get(payload.run_id);
    if (!run) return;
    const retry = payload.attempt > 0 ? ` (retry ${payload.attempt})` : "";
    run.rows.push({ kind: "step", label: `model step ${payload.step}${retry}`, detail: tokens(payload.usage),
      state: "done", start: at - payload.step_ms * 1000, end: at });
    const model = this._model.get(run.runId);
    model.since = null;
    model.next = payload.step + 1;
  }

  _committed() {
    // The step committed: its calls (if any) are what the run waits on now.
    if (this._current) this._model.get(this._current.runId).since = null;
  }

  _called(event, at) {
    const run = this._current;
    if (!run) return;
    const call = { id: event.call_id, kind: kindOf(event.name), label: event.name, detail: "", state: "running",
      start: at, end: null, failed: null, children: [] };
    run.rows.push(call);
    this._calls.set(event.call_id, { run, call });
    this._model.get(run.runId).since = null;
  }

  _open(call, kind, label, at, detail = "", key = null) {
    call.children.push({ kind, label, detail, state: "waiting", start: at, end: null, key });
  }

  _close(call, kinds, at, state) {
    for (const child of call.children) {
      if (child.end === null && (kinds === null || kinds.includes(child.kind))) Object.assign(child, { end: at, state });
    }
  }

  _approvalRequested(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    this._open(found.call, "approval", "approval", at);
    found.call.state = "awaiting approval";
  }

  _approvalResolved(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    const decided = event.decision === "deny" ? "denied" : "allowed";
    this._close(found.call, ["approval"], at, event.reason === "timeout" ? `${decided}: timed out` : decided);
    found.call.state = event.decision === "deny" ? "denied" : "running";
  }

  _dispatched(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    const call = found.call;
    this._close(call, ["client_wait"], at, "a client took it");
    call.kind = "client";
    const name = this._names.get(event.client_id) ?? "its client";
    this._open(call, "ack", "waits for the ack", at, name);
    call.state = "dispatched";
  }

  _acked(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    this._close(found.call, ["ack"], at, "acked");
    this._open(found.call, "client", "runs on the client", at, this._names.get(event.client_id) ?? "");
    found.call.state = "acked";
  }

  _waiting(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    this._close(found.call, ["ack", "client"], at, "its client left");
    this._open(found.call, "client_wait", `waits for a client ${event.client_name}`, parseTime(event.since) ?? at);
    found.call.state = "waiting for its client";
  }

  _inputRequested(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    this._open(found.call, "input", event.url ? "input: a page to visit" : "input: a form", at, event.message, event.request_id);
  }

  _inputProvided(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    const child = found.call.children.find((c) => c.kind === "input" && c.key === event.request_id && c.end === null);
    if (child) Object.assign(child, { end: at, state: event.reason ? `cancelled: ${event.reason}` : event.action });
  }

  _failed(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    found.call.failed = event.reason + (event.detail ? ` (${event.detail})` : "");
    this._close(found.call, null, at, `failed: ${found.call.failed}`);
  }

  _result(event, at) {
    const found = this._calls.get(event.call_id);
    if (!found) return;
    const { run, call } = found;
    this._close(call, null, at, "ended");
    let state = event.is_error ? "error" : "done";
    if (call.failed) state = `failed: ${call.failed}`;
    else if (call.state === "denied") state = "denied";
    Object.assign(call, { end: at, state });
    // The last of a step's calls settled: the run's next step begins.
    const open = run.rows.some((row) => row.kind !== "step" && row.end === null);
    if (!open && run.end === null && run === this._current) this._model.get(run.runId).since = at;
  }

  _ended(event, at) {
    const run = this._runs.get(event.run_id);
    if (!run) return;
    Object.assign(run, { end: at, outcome: ENDS[event.type] });
    if (event.type === "run_failed") run.error = event.error;
    if (event.usage) run.usage = event.usage;
    this._traced(run, event);
    const model = this._model.get(run.runId);
    // A step that never committed (the model failed, the run was cancelled mid-step) still took its time.
    if (model.since !== null) {
      run.rows.push({ kind: "step", label: `model step ${model.next}`, detail: "never committed", state: run.outcome,
        start: model.since, end: at });
      model.since = null;
    }
    for (const row of run.rows) {
      if (row.end !== null) continue;
      if (row.children) this._close(row, null, at, `unsettled: run ${run.outcome}`);
      Object.assign(row, { end: at, state: `unsettled: run ${run.outcome}` });
    }
    if (this._current === run) this._current = null;
  }
}

/** The runs of `events` (in log order), as `Timeline` folds them. */
export function runsOf(events) {
  const timeline = new Timeline();
  for (const event of events) timeline.add(event);
  return timeline.runs();
}

/** What a waterfall draws of `run` at `now` (microseconds): `{start, end, open, rows}`, its rows in order
 * of start (a call's waits under it, `depth` 1), each with `open`, its `duration` and its bar's `offset`
 * and `width` as fractions of the run's span. A run the model is working on has its step as an open row
 * (`modelSince`: since when, from `Timeline.modelSince`; `nextStep` its number). */
export function layout(run, now, modelSince = null, nextStep = 0) {
  const start = run.queuedAt ?? run.start ?? now;
  const end = run.end ?? Math.max(now, start);
  const span = Math.max(1, end - start);
  const top = [];
  if (run.queuedAt !== null && run.start !== null) {
    top.push({ kind: "queue", label: "queued for a worker", detail: "", state: "started", start: run.queuedAt, end: run.start, children: [] });
  }
  top.push(...run.rows);
  if (run.end === null && modelSince !== null) {
    top.push({ kind: "step", label: `model step ${nextStep}`, detail: "", state: "running", start: modelSince, end: null });
  }
  const order = { queue: 0, step: 1 };
  top.sort((a, b) => a.start - b.start || (order[a.kind] ?? 2) - (order[b.kind] ?? 2));
  const rows = [];
  const place = (row, depth) => {
    const to = row.end ?? end;
    rows.push({ depth, kind: row.kind, label: row.label, detail: row.detail ?? "", state: row.state,
      start: row.start, end: row.end, open: row.end === null, duration: Math.max(0, to - row.start),
      offset: Math.min(1, Math.max(0, (row.start - start) / span)), width: Math.min(1, Math.max(0, (to - row.start) / span)) });
  };
  for (const row of top) {
    place(row, 0);
    for (const child of row.children ?? []) place(child, 1);
  }
  return { start, end, open: run.end === null, duration: end - start, rows };
}

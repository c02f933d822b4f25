// The console's Timeline panel (served at /pages/timeline-view.js): a run's waterfall, drawn from what
// timeline.js computes. Every text of an event goes into the page as text (the console's `el` makes text
// nodes and attributes, never markup); the trace link is built from the deployment's template alone.

import { Timeline, durationText, layout, traceLink } from "./timeline.js";
import { tokens } from "./transcript.js";

// Runs the panel lists, newest first; the rest are counted.
const RUNS_SHOWN = 10;
const short = (id) => `…${String(id ?? "").slice(-6)}`;
const percent = (fraction) => `${(fraction * 100).toFixed(3)}%`;

/** One run's waterfall: its head (run, outcome, duration, tokens, the link to its trace when `template`
 * is set and the run's events carry a trace id) and a row per step, call and wait, with a bar placed on
 * the run's span and its duration. `now` in microseconds; `modelSince`/`nextStep` as `layout` takes. */
export function waterfall(run, { el, now, template = null, modelSince = null, nextStep = 0 }) {
  const drawn = layout(run, now, modelSince, nextStep);
  const link = traceLink(template, run.traceId);
  const head = el("div", { class: "tl-head" },
    el("b", {}, "run "), el("code", { title: run.runId }, short(run.runId)), " ",
    el("span", { class: `state ${run.outcome}` }, run.outcome), " ",
    el("span", { class: "muted" }, `${durationText(drawn.duration)}${drawn.open ? " so far" : ""}`),
    tokens(run.usage) ? el("span", { class: "muted" }, ` · ${tokens(run.usage)}`) : "",
    link ? el("span", {}, " · ", el("a", { class: "trace", href: link, target: "_blank", rel: "noopener noreferrer" }, "trace")) : "");
  const rows = drawn.rows.map((row) =>
    el("div", { class: `tl-row depth-${row.depth} kind-${row.kind}${row.open ? " open" : ""}`, "data-kind": row.kind },
      // A narrow panel cuts the label short: the whole of it on hover.
      el("span", { class: "tl-label", title: row.detail ? `${row.label} ${row.detail}` : row.label }, row.label,
        row.detail ? el("span", { class: "muted" }, ` ${row.detail}`) : ""),
      el("span", { class: "tl-track" },
        el("span", { class: "tl-bar", style: `left: ${percent(row.offset)}; width: ${percent(row.width)}` })),
      el("span", { class: "tl-time" }, `${durationText(row.duration)}${row.open ? "…" : ""}`),
      el("span", { class: "tl-state muted" }, row.state)));
  return el("div", { class: "tl-run", "data-run": run.runId }, head,
    run.error ? el("div", { class: "tl-error" }, run.error) : "",
    rows.length ? rows : el("p", { class: "note" }, "Nothing yet."));
}

/** Wires the session view's Timeline panel (console.html `#timeline`) to the console's `$` and `el`;
 * `template()` is the deployment's trace URL template or null. Returns `{see(event), reset()}`: `see` takes
 * every event of the session, `reset` forgets them (another session opened). `schedule` and `now`
 * (microseconds) are the page's animation frame and clock unless a test passes its own. */
export function mountTimeline({ $, el, template, schedule = (draw) => requestAnimationFrame(draw),
  now = () => Date.now() * 1000, every = (tick) => setInterval(tick, 1000) }) {
  let timeline = new Timeline();
  // The run shown: null follows the newest.
  let chosen = null;
  let pending = false;
  let live = false;

  function render() {
    pending = false;
    const runs = timeline.runs();
    if (!runs.length) {
      live = false;
      return $("timeline").replaceChildren(el("p", { class: "note" }, "No runs yet."));
    }
    const newest = runs[runs.length - 1];
    const shown = runs.find((r) => r.runId === chosen) ?? newest;
    const listed = runs.slice(-RUNS_SHOWN).reverse();
    const pick = (run) => () => { chosen = run === newest ? null : run.runId; render(); };
    const list = el("div", { class: "tl-runs" },
      ...listed.map((run) => el("button", { type: "button", class: `plain${run === shown ? " chosen" : ""}`,
        "data-run": run.runId, onclick: pick(run) }, `${short(run.runId)} ${run.outcome}`)),
      runs.length > listed.length ? el("span", { class: "note" }, ` and ${runs.length - listed.length} earlier`) : "");
    live = shown.end === null;
    // The page's clock may lag the log's (Redis's): an open row reaches at least the latest event.
    const at = Math.max(now(), timeline.latest ?? 0);
    $("timeline").replaceChildren(list, waterfall(shown, { el, now: at, template: template(),
      modelSince: timeline.modelSince(shown.runId), nextStep: timeline.nextStep(shown.runId) }));
  }

  const redraw = () => {
    if (pending) return;
    pending = true;
    schedule(render);
  };
  // An open run's bars and durations grow while nothing is logged.
  every(() => { if (live) redraw(); });

  return {
    see(event) {
      timeline.add(event);
      redraw();
    },
    reset() {
      timeline = new Timeline();
      chosen = null;
      redraw();
    },
  };
}

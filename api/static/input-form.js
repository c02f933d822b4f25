// The console's input requests (served at /pages/input-form.js): a client that acked a call asks the
// person (`input_requested`: a form from an MCP elicitation schema, or a page to visit), the console
// shows it with accept / decline / cancel and posts the answer; an ended one shows how it ended
// (`input_provided`).

import { safeLink } from "./sign-ins.js";

/** The fields of a form (MCP's `requestedSchema`: a flat object of string, number, integer, boolean and
 * enum properties), in the schema's order: `{name, kind, title, description, required, options, ...}`,
 * `kind` one of string, number, integer, boolean, enum (`options`: `{value, title}`). */
export function fieldsOf(schema) {
  const required = new Set(schema?.required ?? []);
  return Object.entries(schema?.properties ?? {}).map(([name, prop]) => {
    let options = null;
    if (Array.isArray(prop.enum)) options = prop.enum.map((value, i) => ({ value, title: prop.enumNames?.[i] ?? value }));
    else if (Array.isArray(prop.oneOf)) options = prop.oneOf.map((o) => ({ value: o.const, title: o.title ?? o.const }));
    return {
      name,
      kind: options ? "enum" : prop.type,
      title: prop.title ?? name,
      description: prop.description ?? "",
      required: required.has(name),
      options,
      format: prop.format ?? null,
      minimum: prop.minimum ?? null,
      maximum: prop.maximum ?? null,
      default: prop.default,
    };
  });
}

/** The `content` of what a person entered (`values`: field name -> the text typed, or a checkbox's
 * boolean): `{content}`, or `{problem}` naming the field. A number is parsed; an empty optional field is
 * left out; the server checks the rest (bounds, formats) and its 400 names the field too. */
export function contentOf(fields, values) {
  const content = {};
  for (const field of fields) {
    const raw = values[field.name];
    if (field.kind === "boolean") {
      content[field.name] = raw === true;
      continue;
    }
    const text = typeof raw === "string" ? raw : "";
    if (text.trim() === "") {
      if (field.required) return { problem: `${field.name}: required` };
      continue;
    }
    if (field.kind === "number" || field.kind === "integer") {
      const number = Number(text);
      if (!Number.isFinite(number)) return { problem: `${field.name}: must be a number` };
      if (field.kind === "integer" && !Number.isInteger(number)) return { problem: `${field.name}: must be a whole number` };
      content[field.name] = number;
    } else {
      content[field.name] = text;
    }
  }
  return { content };
}

/** Answers request `requestId` through `api` (the console's `(method, path, body) => parsed body`). */
export function answerInput(api, sessionId, requestId, action, content) {
  const body = content === undefined ? { action } : { action, content };
  return api("POST", `/v1/sessions/${sessionId}/input-requests/${encodeURIComponent(requestId)}`, body);
}

const ENDED = {
  accept: "accepted",
  decline: "declined",
  cancel: "cancelled",
};
const REASONS = {
  call_settled: "cancelled: its call ended first",
  call_waiting: "cancelled: its client left and the call waits for the next one",
};

/** What an ended request says: who ended it and how (`ended`: its `input_provided` event). */
export function endedText(ended, byHere) {
  if (ended.reason) return REASONS[ended.reason] ?? `cancelled (${ended.reason})`;
  const what = `${ENDED[ended.action] ?? ended.action}${byHere ? " by you" : ""}`;
  return ended.content ? `${what}: ${JSON.stringify(ended.content)}` : what;
}

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

// The console's `el` sets every prop as an attribute, and an attribute present is true whatever its
// value: a flag that is off is left out.
function flags(props) {
  return Object.fromEntries(Object.entries(props).filter(([, value]) => value !== false && value !== undefined && value !== null));
}

function control(el, field) {
  const id = `input-field-${field.name}`;
  if (field.kind === "boolean") {
    return el("label", { class: "field" }, el("input", flags({ type: "checkbox", name: field.name, checked: field.default === true })), ` ${field.title}`);
  }
  let box;
  if (field.kind === "enum") {
    const blank = field.required ? [] : [el("option", { value: "" }, "—")];
    box = el("select", { name: field.name, id },
      ...blank, ...field.options.map((o) => el("option", flags({ value: o.value, selected: o.value === field.default }), o.title)));
  } else {
    const props = { name: field.name, id, required: field.required };
    if (field.kind === "number" || field.kind === "integer") {
      Object.assign(props, { type: "number", step: field.kind === "integer" ? "1" : "any" });
      if (field.minimum !== null) props.min = String(field.minimum);
      if (field.maximum !== null) props.max = String(field.maximum);
    } else {
      props.type = INPUT_TYPES[field.format] ?? "text";
    }
    if (field.default !== undefined) props.value = String(field.default);
    box = el("input", flags(props));
  }
  return el("label", { class: "field", for: id }, `${field.title}${field.required ? " *" : ""}`,
    field.description ? el("span", { class: "note" }, ` ${field.description}`) : "", box);
}

/** A form's entries as `contentOf` reads them (a checkbox's state, else the text). */
export function valuesOf(form, fields) {
  const values = {};
  for (const field of fields) {
    const box = form.elements[field.name];
    values[field.name] = field.kind === "boolean" ? Boolean(box?.checked) : (box?.value ?? "");
  }
  return values;
}

/** The card of one request: `request` is `{asked, ended, byHere}` (its `input_requested` event, its
 * `input_provided` or null, whether this console answered it); `answer(action, content?)` posts an
 * answer and rejects with the server's error. `el` is the console's element helper. */
export function inputCard(request, { el, answer }) {
  const { asked, ended } = request;
  const head = el("div", {}, el("b", {}, asked.tool), " ", el("span", { class: "muted" }, asked.url ? "asks you to visit a page" : "asks"));
  const message = el("div", { class: "message" }, asked.message);
  if (ended) {
    return el("div", { class: `input ${ended.reason ? "cancelled" : "answered"}`, "data-request": asked.request_id },
      head, message, el("div", { class: "state note" }, endedText(ended, request.byHere)));
  }
  const problem = el("div", { class: "problem note" });
  const send = async (action, content) => {
    problem.textContent = "";
    try { await answer(action, content); } catch (error) { problem.textContent = error.message; }
  };
  const decline = el("button", { type: "button", class: "plain", onclick: () => send("decline") }, "Decline");
  const cancel = el("button", { type: "button", class: "danger", onclick: () => send("cancel") }, "Cancel");
  if (asked.url) {
    return el("div", { class: "input open", "data-request": asked.request_id }, head, message,
      // The server checks a page's scheme when the request is made; a console never trusts the stream for it.
      el("div", {}, safeLink(asked.url)
        ? el("a", { href: safeLink(asked.url), target: "_blank", rel: "noopener noreferrer" }, asked.url)
        : el("span", { class: "problem note" }, `not an http(s) address, not shown as a link: ${asked.url}`)),
      el("div", { class: "actions" },
        el("button", { type: "button", onclick: () => send("accept") }, "Done"), decline, cancel),
      problem);
  }
  const fields = fieldsOf(asked.schema);
  const form = el("form", {
    onsubmit: (event) => {
      event.preventDefault();
      const got = contentOf(fields, valuesOf(event.target, fields));
      if (got.problem) problem.textContent = got.problem;
      else send("accept", got.content);
    },
  }, ...fields.map((field) => control(el, field)),
  el("div", { class: "actions" }, el("button", { type: "submit" }, "Accept"), decline, cancel));
  return el("div", { class: "input open", "data-request": asked.request_id }, head, message, form, problem);
}

// Ended requests the panel keeps showing, newest last, beside every open one.
const ENDED_SHOWN = 5;

/** Wires the session view's Input requests panel (console.html `#inputs-panel`) to the console's helpers
 * (`$`, `el`, `api`) and `sessionId()` (the open session's id); returns `{see(event), reset()}`: `see`
 * takes every event of the session (it reads `input_requested` and `input_provided`, shown with
 * `?include=extensions`). A card stays the same node while its request is open, so what a person is
 * typing survives other events. */
export function mountInputs({ $, el, api, sessionId }) {
  const requests = new Map();
  const answeredHere = new Set();

  function card(request) {
    const id = request.asked.request_id;
    const answer = async (action, content) => {
      answeredHere.add(id);
      try { await answerInput(api, sessionId(), id, action, content); } catch (error) { answeredHere.delete(id); throw error; }
    };
    return inputCard({ ...request, byHere: answeredHere.has(id) }, { el, answer });
  }

  function render() {
    const all = [...requests.values()];
    const open = all.filter((r) => !r.ended);
    const shown = [...all.filter((r) => r.ended).slice(-ENDED_SHOWN), ...open];
    $("input-count").textContent = open.length ? String(open.length) : "";
    $("inputs-panel").classList.toggle("empty", !shown.length);
    if (!shown.length) return $("inputs").replaceChildren(el("p", { class: "note" }, "None."));
    $("inputs").replaceChildren(...shown.map((r) => { r.node ??= card(r); return r.node; }));
  }

  function see(event) {
    if (event.type === "input_requested") {
      requests.set(event.request_id, { asked: event, ended: null, node: null });
    } else if (event.type === "input_provided") {
      const request = requests.get(event.request_id);
      if (!request) return;
      Object.assign(request, { ended: event, node: null });
      // Ended ones move after the ones that ended before them.
      requests.delete(event.request_id);
      requests.set(event.request_id, request);
    } else {
      return;
    }
    render();
  }

  function reset() {
    requests.clear();
    render();
  }

  return { see, reset };
}

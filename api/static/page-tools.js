// Ready-made tools over the page a client runs in: read it, fill and submit forms, click, highlight,
// navigate, and (where the page can render one) take a screenshot. Each checks its arguments and answers
// with what it did, so the model can tell what happened.
//
//   const tab = await session.registerClient({ name: "web", tools: pageTools() });
//   pageTools({ root: document.querySelector("main"), navigate: (url) => router.push(url) })

function need(condition, message) {
  if (!condition) throw new TypeError(message);
}

function text(value, name) {
  need(typeof value === "string" && value.trim() !== "", `${name} must be a non-empty string`);
  return value.trim();
}

function norm(value) {
  return (value ?? "").replace(/\s+/g, " ").trim().toLowerCase();
}

function visible(element) {
  if (!(element instanceof Element)) return false;
  const style = getComputedStyle(element);
  const box = element.getBoundingClientRect();
  return style.visibility !== "hidden" && style.display !== "none" && (box.width > 0 || box.height > 0);
}

function describe(element) {
  // Attributes, not properties: a form's `name` or `id` property is its control of that name, if it has one.
  const label = element.getAttribute("aria-label") || element.getAttribute("name") || element.getAttribute("id") ||
    norm(element.textContent).slice(0, 40);
  return `${element.tagName.toLowerCase()}${label ? ` "${label}"` : ""}`;
}

const FIELDS = "input:not([type=hidden]), textarea, select";

/** What a person would call a form control: its aria-label, its label's own words, its name or id. */
function fieldName(element) {
  const label = element.labels?.[0];
  // A label's own text, without the text of the control it wraps (a select's options, say).
  const own = label ? [...label.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join(" ") : "";
  const words = (value) => (value ?? "").replace(/\s+/g, " ").trim();
  return element.getAttribute("aria-label") || words(own) || words(label?.textContent) || element.name || element.id ||
    element.tagName.toLowerCase();
}

/** Each control of the form that stops it from being submitted, with what the browser says of it. */
function problems(form) {
  return [...form.elements]
    .filter((element) => element.willValidate && !element.validity.valid)
    .map((element) => `${fieldName(element)}: ${element.validationMessage}`)
    .join("; ");
}

/** The form a click on `element` would submit (a submit button's form), or null. */
function submits(element) {
  const submitter = (element instanceof HTMLButtonElement && element.type === "submit") ||
    (element instanceof HTMLInputElement && (element.type === "submit" || element.type === "image"));
  return submitter && element.form && !element.form.noValidate && !element.formNoValidate ? element.form : null;
}

// What a tool changes is scrolled into sight (only if it is out of it), so a person watching sees it.
function bringIntoView(element) {
  element.scrollIntoView?.({ block: "nearest", behavior: "smooth" });
}

/** The form control a person would mean by `label`, `name` or `selector`. */
function findField(root, { label, name, selector }) {
  if (selector) return root.querySelector(selector);
  if (name) return root.querySelector(`[name="${CSS.escape(name)}"]`);
  const wanted = norm(label);
  for (const element of root.querySelectorAll("label")) {
    if (norm(element.textContent) === wanted || norm(element.textContent).startsWith(wanted)) {
      if (element.control) return element.control;
    }
  }
  for (const element of root.querySelectorAll(FIELDS)) {
    if ([element.getAttribute("aria-label"), element.placeholder, element.name].some((v) => norm(v) === wanted)) {
      return element;
    }
  }
  return null;
}

function setValue(element, value) {
  if (element instanceof HTMLSelectElement) {
    const option = [...element.options].find((o) => o.value === String(value) || norm(o.text) === norm(String(value)));
    need(option, `${describe(element)} has no option ${JSON.stringify(value)}`);
    element.value = option.value;
  } else if (element.type === "checkbox" || element.type === "radio") {
    element.checked = value === true || value === "true" || value === "on" || value === element.value;
  } else {
    // The prototype's setter, so frameworks that track the value property see the change.
    const prototype = element instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(prototype, "value").set.call(element, String(value));
  }
  element.dispatchEvent(new Event("input", { bubbles: true }));
  element.dispatchEvent(new Event("change", { bubbles: true }));
}

const CLICKABLE = "button, a[href], [role=button], input[type=submit], input[type=button]";

function findClickable(root, { text: wanted, selector }) {
  if (selector) return root.querySelector(selector);
  const target = norm(wanted);
  const candidates = [...root.querySelectorAll(CLICKABLE)].filter(visible);
  return (
    candidates.find((e) => norm(e.textContent || e.value) === target) ??
    candidates.find((e) => norm(e.textContent || e.value).includes(target)) ??
    null
  );
}

/**
 * The page tools, for `registerClient({tools})`. Options: `root` (default document.body) limits what
 * they see and touch; `navigate(url)` replaces a full page load (for single-page apps).
 */
// A screenshot is an image result: at most this many bytes decoded (the server takes 5 MiB per result).
const MAX_PICTURE_BYTES = 4 * 1024 * 1024;

function canPicture() {
  return typeof document !== "undefined" && typeof XMLSerializer !== "undefined" &&
    typeof document.createElement("canvas").getContext === "function";
}

/** The element drawn as the user sees it: its subtree with computed styles inlined, through an SVG
 * foreignObject onto a canvas (a canvas element is read directly). Base64 PNG. */
async function picture(element) {
  if (element instanceof HTMLCanvasElement) return element.toDataURL("image/png").split(",", 2)[1];
  const box = element.getBoundingClientRect();
  const width = Math.max(1, Math.ceil(Math.min(box.width || document.documentElement.clientWidth, 4096)));
  const height = Math.max(1, Math.ceil(Math.min(box.height || document.documentElement.clientHeight, 4096)));
  const clone = element.cloneNode(true);
  const originals = [element, ...element.querySelectorAll("*")];
  const copies = [clone, ...clone.querySelectorAll("*")];
  originals.forEach((original, index) => {
    const computed = getComputedStyle(original);
    const copy = copies[index];
    for (const name of computed) copy.style.setProperty(name, computed.getPropertyValue(name));
    if (original instanceof HTMLInputElement || original instanceof HTMLTextAreaElement) copy.setAttribute("value", original.value);
  });
  const xhtml = new XMLSerializer().serializeToString(clone);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
    `<foreignObject width="100%" height="100%">${xhtml}</foreignObject></svg>`;
  const image = new Image();
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  canvas.getContext("2d").drawImage(image, 0, 0);
  return canvas.toDataURL("image/png").split(",", 2)[1];
}

export function pageTools({ root = null, navigate = null } = {}) {
  const scope = () => root ?? document.body;
  let highlighted = null;

  return {
    read_page: {
      description: "Read the visible text of the page the user is looking at, with its title and URL.",
      parameters: {
        type: "object",
        properties: { max_chars: { type: "integer", minimum: 100, maximum: 60000, description: "Cut the text here" } },
        additionalProperties: false,
      },
      execute({ max_chars = 20000 } = {}) {
        need(Number.isInteger(max_chars) && max_chars >= 100 && max_chars <= 60000, "max_chars must be 100 to 60000");
        const body = scope().innerText ?? "";
        return { title: document.title, url: location.href, text: body.slice(0, max_chars), truncated: body.length > max_chars };
      },
    },

    fill_form: {
      description: "Fill form fields, each found by its visible label, its name, or a CSS selector.",
      parameters: {
        type: "object",
        properties: {
          fields: {
            type: "array",
            minItems: 1,
            items: {
              type: "object",
              properties: {
                label: { type: "string" },
                name: { type: "string" },
                selector: { type: "string" },
                value: { type: ["string", "number", "boolean"] },
              },
              required: ["value"],
              additionalProperties: false,
            },
          },
        },
        required: ["fields"],
        additionalProperties: false,
      },
      execute({ fields } = {}) {
        need(Array.isArray(fields) && fields.length > 0, "fields must be a non-empty array");
        const filled = [];
        const missing = [];
        for (const field of fields) {
          need(field && (field.label || field.name || field.selector), "each field needs a label, a name or a selector");
          need(field.value !== undefined, "each field needs a value");
          const element = findField(scope(), field);
          if (!element) {
            missing.push(field.label ?? field.name ?? field.selector);
            continue;
          }
          setValue(element, field.value);
          if (!filled.length) bringIntoView(element);
          filled.push(`${describe(element)} = ${JSON.stringify(field.value)}`);
        }
        if (missing.length) {
          throw new Error(`no field found for ${missing.map((m) => JSON.stringify(m)).join(", ")}; filled: ${filled.join("; ") || "nothing"}`);
        }
        return `filled ${filled.join("; ")}`;
      },
    },

    submit_form: {
      description: "Submit a form: the only one on the page, or the one with this name, id or CSS selector.",
      parameters: {
        type: "object",
        properties: { form: { type: "string", description: "name, id or CSS selector" } },
        additionalProperties: false,
      },
      execute({ form } = {}) {
        const forms = [...scope().querySelectorAll("form")];
        let target;
        if (form !== undefined) {
          const wanted = text(form, "form");
          target = forms.find((f) => f.name === wanted || f.id === wanted) ?? scope().querySelector(wanted);
        } else {
          need(forms.length === 1, `there are ${forms.length} forms on the page; say which with form`);
          target = forms[0];
        }
        need(target instanceof HTMLFormElement, `no form ${JSON.stringify(form)}`);
        // The browser shows the person what is missing; the model reads the same.
        if (!target.reportValidity()) throw new Error(`${describe(target)} was not submitted: ${problems(target)}`);
        target.requestSubmit();
        return `submitted ${describe(target)}`;
      },
    },

    click: {
      description: "Click a button or link, found by its text or a CSS selector.",
      parameters: {
        type: "object",
        properties: { text: { type: "string" }, selector: { type: "string" } },
        additionalProperties: false,
      },
      execute(args = {}) {
        need(args.text || args.selector, "give text or selector");
        const element = findClickable(scope(), args);
        need(element, `no button or link ${JSON.stringify(args.text ?? args.selector)}`);
        bringIntoView(element);
        // A submit button of a form that is not valid yet submits nothing: the browser shows the person
        // what is missing ("Please fill out this field"), and the model is told so, not that it worked.
        const form = submits(element);
        const blocked = form && !form.checkValidity() ? problems(form) : "";
        element.click();
        if (blocked) throw new Error(`clicked ${describe(element)}, but ${describe(form)} was not submitted: ${blocked}`);
        return `clicked ${describe(element)}`;
      },
    },

    highlight: {
      description: "Scroll to an element, found by a CSS selector or its text, and highlight it.",
      parameters: {
        type: "object",
        properties: { selector: { type: "string" }, text: { type: "string" }, color: { type: "string" } },
        additionalProperties: false,
      },
      execute({ selector, text: wanted, color = "#ffd54f" } = {}) {
        need(selector || wanted, "give selector or text");
        let element = selector ? scope().querySelector(selector) : null;
        if (!element && wanted) {
          // The innermost element that holds the text, the first such in the page.
          const target = norm(wanted);
          const holds = (e) => visible(e) && norm(e.textContent).includes(target);
          element = [...scope().querySelectorAll("*")].find((e) => holds(e) && ![...e.children].some(holds)) ?? null;
        }
        need(element, `nothing on the page matches ${JSON.stringify(selector ?? wanted)}`);
        if (highlighted) highlighted.style.outline = highlighted.dataset.switchboardOutline ?? "";
        element.dataset.switchboardOutline = element.style.outline;
        element.style.outline = `3px solid ${color}`;
        element.scrollIntoView({ block: "center", behavior: "smooth" });
        highlighted = element;
        return `highlighted ${describe(element)}`;
      },
    },

    navigate: {
      description: "Open a page of this site by its URL or path.",
      parameters: {
        type: "object",
        properties: { url: { type: "string" } },
        required: ["url"],
        additionalProperties: false,
      },
      execute({ url } = {}) {
        const target = new URL(text(url, "url"), location.href);
        need(target.origin === location.origin, `only pages of ${location.origin} can be opened, not ${target.origin}`);
        // After the result is on its way (it is sent with keepalive, so it outlives the page).
        setTimeout(() => (navigate ? navigate(target.href) : location.assign(target.href)), 100);
        return `opening ${target.pathname}${target.search}`;
      },
    },

    ...(canPicture() ? {
      screenshot: {
        description: "Take a picture of the page the user is looking at (or of one element of it), as a PNG image.",
        parameters: {
          type: "object",
          properties: { selector: { type: "string", description: "A CSS selector of the element to picture" } },
          additionalProperties: false,
        },
        async execute({ selector } = {}) {
          const element = selector === undefined ? scope() : scope().querySelector(text(selector, "selector"));
          need(element, `nothing on the page matches ${JSON.stringify(selector)}`);
          let data;
          try {
            data = await picture(element);
          } catch (error) {
            throw new Error(`this page could not be pictured here: ${error?.message ?? error}`);
          }
          need(data.length * 3 / 4 <= MAX_PICTURE_BYTES, "the picture is too large; picture one element of the page");
          return {
            content: [
              { type: "text", text: `a picture of ${describe(element)}` },
              { type: "image", media_type: "image/png", data },
            ],
          };
        },
      },
    } : {}),
  };
}

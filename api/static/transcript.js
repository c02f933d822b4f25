// What the console and the demo share about a transcript box (served at /pages/transcript.js).

/** A result as a person reads it: a JSON object's fields one per line, strings as they are. */
export function readable(text) {
  let value;
  try { value = JSON.parse(text); } catch { return text; }
  if (!value || typeof value !== "object" || Array.isArray(value)) return text;
  return Object.entries(value)
    .map(([name, field]) => `${name}: ${typeof field === "string" ? field : JSON.stringify(field)}`)
    .join("\n");
}

function kib(base64) { return `${Math.max(1, Math.round((base64.length * 3) / 4 / 1024))} KiB`; }

/** A result block as a person reads it where it is not shown as itself (the server's words for it when the
 * stream does not carry it, common/events/blocks.py `describe`): a text as it is, a text resource with its
 * text, audio, a blob and a link named; undefined for an image (shown as one) or a block of no result. */
export function blockText(block) {
  const data = block?.data ?? {};
  switch (block?.type) {
    case "text": return readable(data.text);
    case "audio": return `[audio: ${data.media_type}, ${kib(data.data ?? "")}]`;
    case "resource": {
      const kind = data.media_type ? `, ${data.media_type}` : "";
      if (typeof data.text === "string") return `[resource: ${data.uri}${kind}]\n${data.text}`;
      return `[resource: ${data.uri}${kind || ", application/octet-stream"}, ${kib(data.blob ?? "")}]`;
    }
    case "resource_link": {
      const named = data.name ? `${data.name} ` : "";
      const kind = data.media_type ? `, ${data.media_type}` : "";
      return `[resource link: ${named}<${data.uri}>${kind}${data.description ? `: ${data.description}` : ""}]`;
    }
    default: return undefined;
  }
}

/** Scroll a transcript to its end with its top edge between two entries, never through one (a line cut
 * in half): what is left over goes under the last entry (a spacer, at most one entry high). Returns the
 * box's scrollTop once placed, so a page can tell its own move from the reader's. */
export function toEnd(box) {
  let spacer = box.querySelector(":scope > .end-spacer");
  if (!spacer) {
    spacer = document.createElement("div");
    spacer.className = "end-spacer";
  }
  box.append(spacer);
  spacer.style.height = "0px";
  const end = box.scrollHeight - box.clientHeight;
  // The first entry that starts at or below the end, looked for from the last one back.
  let top;
  for (let node = spacer.previousElementSibling; node && end > 0; node = node.previousElementSibling) {
    const start = node.offsetTop - parseFloat(getComputedStyle(node).marginTop);
    if (start < end) break;
    top = start;
  }
  if (top !== undefined) spacer.style.height = `${top - end}px`;
  box.scrollTop = top ?? end;
  return box.scrollTop;
}

/** What a run's model steps used (run_completed's `usage`, an extension) as one phrase, or "" when the
 * provider counted nothing: "1,234 tokens in (1,000 cached), 56 out (12 reasoning)". */
export function tokens(usage) {
  if (!usage || typeof usage !== "object") return "";
  const n = (value) => (typeof value === "number" ? value.toLocaleString("en-US") : "?");
  const { input_tokens: input, output_tokens: output, cached_input_tokens: cached, reasoning_tokens: reasoning } = usage;
  if ([input, output, cached, reasoning].every((value) => value === undefined || value === null)) return "";
  const inPart = `${n(input)} tokens in` + (typeof cached === "number" ? ` (${n(cached)} cached)` : "");
  const outPart = `${n(output)} out` + (typeof reasoning === "number" ? ` (${n(reasoning)} reasoning)` : "");
  return `${inPart}, ${outPart}`;
}

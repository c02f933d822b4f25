// A page of your own app serving tools to an agent, in TypeScript: the types come from the server's
// /sdk/switchboard.d.ts (tsconfig.json maps the import below to it). Your backend creates the session with
// its API key and hands the page the session id, and a session token when asked:
//
//   start(sessionId, () => fetch("/my-app/switchboard-token").then((r) => r.text()));
//
// Checked by `node_modules/.bin/tsc -p examples/typed/tsconfig.json --noEmit` (CI runs it).

import {
  connect,
  pageTools,
  SwitchboardError,
  type Connection,
  type StreamEvent,
  type Tool,
  type ToolCallContext,
  type ToolContentResult,
} from "/sdk/switchboard.js";

// A tool's arguments: a type alias (not an interface), matching its JSON Schema below.
type HighlightRowArgs = { row_id: string; color?: string };

/** Outline one row of the invoices table; the model reads what it did. */
const highlightRow: Tool<HighlightRowArgs, string> = {
  description: "Highlight a row of the invoices table",
  parameters: {
    type: "object",
    properties: { row_id: { type: "string" }, color: { type: "string" } },
    required: ["row_id"],
    additionalProperties: false,
  },
  heartbeat_s: 30,
  async execute({ row_id, color = "#ffd54f" }: HighlightRowArgs, call: ToolCallContext): Promise<string> {
    const row = document.querySelector<HTMLTableRowElement>(`tr[data-id="${CSS.escape(row_id)}"]`);
    // A throw is an error result whose text is its message.
    if (!row) throw new Error(`no row ${row_id} in the table`);
    await call.progress(`found row ${row_id}`, 0.5);
    call.signal.throwIfAborted(); // the call failed meanwhile (cancelled, timed out): its result is not sent
    row.style.outline = `3px solid ${color}`;
    row.scrollIntoView({ block: "center" });
    return `Row ${row_id} is highlighted.`;
  },
};

type MarkPaidArgs = { row_id: string; amount: number };

/** Mark an invoice paid, once the person confirmed the amount in a form (an input request). */
const markPaid: Tool<MarkPaidArgs, string> = {
  description: "Mark an invoice paid (the person confirms the amount first)",
  parameters: {
    type: "object",
    properties: { row_id: { type: "string" }, amount: { type: "number" } },
    required: ["row_id", "amount"],
    additionalProperties: false,
  },
  async execute({ row_id, amount }: MarkPaidArgs, call: ToolCallContext): Promise<string> {
    const form = {
      type: "object",
      properties: {
        amount: { type: "number", title: "Amount received", default: amount },
        confirm: { type: "boolean", title: "Received in full" },
      },
      required: ["amount", "confirm"],
    };
    // Waits for the person: the call's deadlines wait with it.
    const answer = await call.ask(`Mark invoice ${row_id} paid?`, form);
    if (answer.action !== "accept" || answer.content?.["confirm"] !== true) {
      return `Invoice ${row_id} was left as it is.`;
    }
    return `Invoice ${row_id} is marked paid (${String(answer.content["amount"])}).`;
  },
};

/** A picture of the chart, as an image result. */
const chartPicture: Tool<Record<string, never>, ToolContentResult> = {
  description: "A picture of the invoices chart",
  parameters: { type: "object", additionalProperties: false },
  execute() {
    const canvas = document.querySelector("canvas");
    if (!canvas) return { content: [{ type: "text", text: "there is no chart on this page" }], is_error: true };
    const data = canvas.toDataURL("image/png").split(",", 2)[1] ?? "";
    return {
      content: [
        { type: "text", text: "the invoices chart" },
        { type: "image", media_type: "image/png", data },
      ],
    };
  },
};

function describe(event: StreamEvent): string | null {
  switch (event.type) {
    case "message_assistant":
      return event.message.content.flatMap((block) => (block.type === "text" ? [block.data.text] : [])).join("");
    case "client_tool_dispatched":
      return `the agent calls ${event.tool}`;
    case "client_tool_progress":
      return `${event.call_id}: ${event.message ?? ""} ${event.fraction === null ? "" : `${event.fraction * 100}%`}`;
    case "client_tool_failed":
      return `a call failed: ${event.reason}${event.detail ? ` (${event.detail})` : ""}`;
    case "run_failed":
      return `the run failed: ${event.error}`;
    default:
      return null;
  }
}

export async function start(sessionId: string, getToken: () => Promise<string>): Promise<Connection> {
  // `extensions` streams the answers to the tools' input requests as they come (without, they are read back).
  const session = connect({ sessionId, getToken, include: ["progress", "extensions"] });
  session.on("status", (status) => {
    document.body.dataset.status = status;
  });
  session.on("*", (event) => {
    const line = describe(event);
    if (line) document.getElementById("log")?.append(Object.assign(document.createElement("li"), { textContent: line }));
  });
  session.on("run_completed", (event) => console.info("run done", event.run_id, event.seq));
  // A grant of the agent needs the person to sign in to its MCP server: a link to open, and a way to say no.
  const signIns = new Map<string, HTMLElement>();
  session.onAuthorizationRequired((signIn) => {
    if (!signIn.authorizationUrl) return;
    const link = Object.assign(document.createElement("a"), {
      href: signIn.authorizationUrl,
      target: "_blank",
      rel: "noopener noreferrer",
      textContent: `Sign in to ${signIn.grant}`,
    });
    const no = Object.assign(document.createElement("button"), { textContent: "Not now" });
    no.onclick = () => void signIn.decline().catch((error: unknown) => console.warn("decline refused", error));
    const row = Object.assign(document.createElement("p"), { title: `until ${signIn.expiresAt}` });
    row.append(link, " ", no);
    signIns.set(signIn.authorizationId, row);
    document.getElementById("sign-ins")?.append(row);
  });
  session.onAuthorizationEnded((ended) => {
    signIns.get(ended.authorizationId)?.remove();
    signIns.delete(ended.authorizationId);
    if (ended.state !== "completed") console.info(`${ended.grant}: sign-in ${ended.state}`);
  });

  try {
    const tab = await session.registerClient({
      name: "web",
      ttl: 60,
      tools: {
        ...pageTools({ root: document.querySelector("main") }),
        highlight_row: highlightRow,
        mark_paid: markPaid,
        chart: chartPicture,
      },
    });
    tab.onRegistered = (client) => console.info("registered again as", client.name);
    await session.ready();
    const outcome = await session.send("Which invoices are overdue? Highlight them.");
    console.info(outcome.outcome, outcome.run_id, "served by", tab.name);
  } catch (error) {
    if (error instanceof SwitchboardError) console.error(`refused: ${error.status} ${error.code}: ${error.message}`);
    await session.close();
    throw error;
  }
  return session;
}

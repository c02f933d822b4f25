// A chat on @ag-ui/client's HttpAgent against Switchboard's AG-UI door, with one frontend tool. See
// index.html for how to build and open it. The session token comes from the page's fragment and is taken
// out of the address bar.
import { HttpAgent, type Message } from "@ag-ui/client";
import { useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

const readTheme = {
  name: "read_theme",
  description: "Read the color theme the user has chosen for this page.",
  parameters: { type: "object", properties: {} },
};

function settings(): { api: string; session: string; token: string } | string {
  const found = new URLSearchParams(location.hash.slice(1));
  const api = found.get("api") ?? location.origin;
  const session = found.get("session");
  const token = found.get("token");
  if (!session || !token) return "Open this page as #api=API_URL&session=SESSION_ID&token=SESSION_TOKEN.";
  history.replaceState(null, "", location.pathname);
  return { api, session, token };
}

// The page's own tools: what each returns for a call's arguments.
const tools: Record<string, (args: unknown) => string> = {
  read_theme: () => document.documentElement.dataset.theme ?? "light",
};

function Chat({ api, session, token }: { api: string; session: string; token: string }) {
  const agent = useMemo(
    () =>
      new HttpAgent({
        url: `${api}/v1/sessions/${session}/ag-ui`,
        headers: { Authorization: `Bearer ${token}` },
        threadId: session,
      }),
    [api, session, token],
  );
  const [messages, setMessages] = useState<Message[]>([]);
  const [state, setState] = useState("ready");
  const [error, setError] = useState("");
  const [text, setText] = useState("");

  async function send(input: string) {
    agent.addMessage({ id: crypto.randomUUID(), role: "user", content: input });
    setState("streaming");
    try {
      // Each AG-UI run ends where the page's turn begins: answer its tools' calls, and run again.
      for (;;) {
        let pending: string[] = [];
        await agent.runAgent(
          { tools: [readTheme] },
          {
            onMessagesChanged: ({ messages }) => setMessages([...messages]),
            onRunFinishedEvent: (finished) => {
              pending = finished.outcome === "success" ? finished.pendingToolCallIds : [];
            },
          },
        );
        if (pending.length === 0) break;
        for (const id of pending) {
          const call = agent.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : [])).find((c) => c.id === id);
          const run = call ? tools[call.function.name] : undefined;
          const content = run ? run(JSON.parse(call?.function.arguments || "{}")) : `no tool ${call?.function.name}`;
          agent.addMessage({ id: crypto.randomUUID(), role: "tool", toolCallId: id, content });
        }
      }
      setState("ready");
    } catch (caught) {
      setError(String((caught as Error)?.message ?? caught));
      setState("failed");
    }
    setMessages([...agent.messages]);
  }

  return (
    <>
      <p id="status" data-state={state}>{error || `Chat: ${state}`}</p>
      <div id="messages">
        {messages.map((message) =>
          message.role === "user" || message.role === "assistant" ? (
            <div key={message.id} className="message" data-role={message.role}>
              {typeof message.content === "string" ? message.content : ""}
              {message.role === "assistant" &&
                (message.toolCalls ?? []).map((call) => (
                  <div key={call.id} className="tool">[{call.function.name}]</div>
                ))}
            </div>
          ) : null,
        )}
      </div>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (text.trim()) void send(text);
          setText("");
        }}
      >
        <input name="text" value={text} onChange={(event) => setText(event.target.value)} placeholder="Say something" />
        <button type="submit" disabled={state === "streaming"}>Send</button>
      </form>
    </>
  );
}

const found = settings();
const root = document.getElementById("root");
document.getElementById("status")?.remove();
if (root) {
  createRoot(root).render(
    typeof found === "string" ? <p id="status" data-state="failed">{found}</p> : <Chat {...found} />,
  );
}

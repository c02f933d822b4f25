// useChat (the AI SDK) against Switchboard's AI SDK door, with one frontend tool. See index.html for how to
// build and open it. The session token comes from the page's fragment and is taken out of the address bar.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from "ai";
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

function Chat({ api, session, token }: { api: string; session: string; token: string }) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: `${api}/v1/sessions/${session}/ai-sdk/chat`,
        headers: { Authorization: `Bearer ${token}` },
        body: { tools: [readTheme] },
      }),
    [api, session, token],
  );
  const { messages, sendMessage, addToolOutput, status, error } = useChat({
    id: session,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    async onToolCall({ toolCall }) {
      if (toolCall.toolName === "read_theme") {
        const theme = document.documentElement.dataset.theme ?? "light";
        addToolOutput({ tool: "read_theme", toolCallId: toolCall.toolCallId, output: theme });
      }
    },
  });
  const [text, setText] = useState("");
  const state = error ? "failed" : status;
  return (
    <>
      <p id="status" data-state={state}>{error ? error.message : `Chat: ${status}`}</p>
      <div id="messages">
        {messages.map((message) => (
          <div key={message.id} className="message" data-role={message.role}>
            {message.parts.map((part, index) =>
              part.type === "text" ? (
                <span key={index}>{part.text}</span>
              ) : part.type.startsWith("tool-") || part.type === "dynamic-tool" ? (
                <div key={index} className="tool">
                  [{part.type.replace(/^tool-/, "")}: {"state" in part ? String(part.state) : ""}]
                </div>
              ) : null,
            )}
          </div>
        ))}
      </div>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (text.trim()) sendMessage({ text });
          setText("");
        }}
      >
        <input name="text" value={text} onChange={(event) => setText(event.target.value)} placeholder="Say something" />
        <button type="submit" disabled={status === "streaming" || status === "submitted"}>Send</button>
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

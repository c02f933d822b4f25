"""Each session as an MCP server (`/v1/sessions/{sid}/mcp`, Streamable HTTP, stateless), through the
official `mcp` package's server side: `tools/list` gives the client tools a step of the session's active
run offers its model, under the names the model sees (a registered client's `client__<name>__<tool>`, the
run's own run-scoped tools their own names), and `tools/call` goes as a model's call does: under the
agent's policy for the tool (a deny answered at once, never dispatched; `require_approval` waits for the
decision, or is decided by one remembered for the session), then to the registration (bound to it, its
ack and result deadlines and the tool's own, arguments checked first), logged as a call from an MCP
client outside any run (`client_tool_dispatched` and `approval_requested` with `"from": "mcp"`). The
caller waits for the call's outcome on the session's live feed; every request holds one of the stream
caps' slots while its answer is open. Progress becomes MCP progress, and an MCP cancel (or the caller
going away) cancels the call."""

-- Dispatches a call that no run made (an MCP client's, through /v1/sessions/{sid}/mcp) to the registration
-- that serves the tool, as a step's allowed call is dispatched (commit_step.lua): the call record, the
-- registration's call stream, `client_tool_dispatched` (with the extension field `"from":"mcp"`) and the
-- ack deadline. Its record's run is '', so settling it (a result, a failure, a cancel) continues no run.
--
--!layout lib/call.lua   (cid is the client id)
--!key client       the client hash
--!key stream       its call stream
--!arg tool         raw tool name
--!arg event        the client_tool_dispatched JSON
--!arg ack_ms       ack deadline (ms)
--!arg retention_ms call stream retention (ms)
--!arg timeout_ms   the tool's result deadline (ms; '' for the deployment's)
--!arg heartbeat_ms its heartbeat (ms; '' for none)
--
-- Returns {'ok', seq of client_tool_dispatched}; refusal not_found (no session; the registration
-- is not active or does not serve the tool); refusal conflict when the session's storage is full
-- (SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
if not sb_holds(K.client, A.tool, {}) then return sb_refuse('not_found', 'no_tool', S.cid, A.tool) end
local full = sb_room(S.meta, S.now, 2 * #A.event + 4 * SB_ENTRY + 256, SB_P.cap)
if full then return full end
local rec = {kind = 'client', client = S.cid, run = '', step = 0, tool = A.tool,
  to = tonumber(A.timeout_ms), hb = tonumber(A.heartbeat_ms)}
local event = sb_dispatch(S, rec, K.stream, A.event, tonumber(A.ack_ms), tonumber(A.retention_ms))
return sb_reply(string.match(event, '^{"seq":(%d+)'))

-- Dispatches a call that no run made (an MCP client's, through /v1/sessions/{sid}/mcp) to the registration
-- that serves the tool, as a step's allowed call is dispatched (commit_step.lua): the call record, the
-- registration's call stream, `client_tool_dispatched` (with the extension field `"from":"mcp"`) and the
-- ack deadline. Its record's run is '', so settling it (a result, a failure, a cancel) continues no run.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] the client id).  KEYS[6] the client hash
-- KEYS[7] its call stream
-- ARGV[5] raw tool name  ARGV[6] client_tool_dispatched JSON  ARGV[7] ack deadline ms
-- ARGV[8] call stream retention ms  ARGV[9] the tool's result deadline ms ('' for the deployment's)
-- ARGV[10] its heartbeat ms ('' for none)
-- Returns {0, seq of client_tool_dispatched}; {404, 'session' | 'client'} (no session; the registration
-- is not active or does not serve the tool); {409, message} when the session's storage is full
-- (SWITCHBOARD_MAX_SESSION_BYTES).

--!layout lib/call.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
if not sb_holds(KEYS[6], ARGV[5], {}) then return sb_refuse(404, 'client') end
local full = sb_room(S.meta, S.now, 2 * #ARGV[6] + 4 * SB_ENTRY + 256, SB_P.cap)
if full then return sb_refuse(409, full) end
local rec = {kind = 'client', client = S.cid, run = '', step = 0, tool = ARGV[5],
  to = tonumber(ARGV[9]), hb = tonumber(ARGV[10])}
local event = sb_dispatch(S, rec, KEYS[7], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]))
return sb_reply(string.match(event, '^{"seq":(%d+)'))

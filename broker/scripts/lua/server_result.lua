-- Records a server call's result as its `tool_result` and settles it.
--
--!layout lib/call.lua   (cid is '')
--!arg event       the tool_result event JSON
--
-- Returns {'ok', 'settled' | 'stale'} ('stale': the call was settled meanwhile, e.g. as interrupted). A
-- result that would pass the session's storage cap (SWITCHBOARD_MAX_SESSION_BYTES) is not kept: the
-- call's result is an error saying so, and the run goes on.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
local full = sb_room(S.meta, S.now, #A.event + SB_ENTRY, SB_P.cap)
sb_append(S, full and sb_error_result(S.call_id, 'the tool\'s result was not kept: ' .. sb_full_text(full)) or A.event)
sb_settle(S, S.call_id, rec, 'answered', nil)
return sb_reply('settled')

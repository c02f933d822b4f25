-- Notes on the record of a call an MCP caller made that its client asked the caller for something the
-- caller did not declare it answers (the client was refused at once, api/routes/inputs.py). Should the call
-- then end with an error result, the caller is answered with MCP's missing-capability error naming this
-- capability rather than the tool's error (api/mcp/outcome.py): the client's error is the consequence. A
-- call no MCP caller made, or a settled one, is left as it is.
--
--!layout lib/call.lua   (cid is the asking client)
--!arg capability    the capability the caller lacked (`sampling`, `roots`)
--
-- Returns {'ok', 1 when noted, 0 when left as it is}; refusal not_found (no session).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local rec = sb_own_call(S)
local settled = {answered = true, failed = true, denied = true}
if not rec or rec.src ~= 'mcp' or settled[rec.state] then return sb_reply(0) end
local lacked = rec.mc or {}
for _, capability in ipairs(lacked) do
  if capability == A.capability then return sb_reply(1) end
end
lacked[#lacked + 1] = A.capability
rec.mc = lacked
sb_put_call(S.meta, S.calls, S.call_id, rec)
return sb_reply(1)

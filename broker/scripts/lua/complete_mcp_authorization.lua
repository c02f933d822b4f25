-- Records in a session that its person signed in to an OAuth grant's MCP server (the callback exchanged
-- the code and kept the tokens first): `mcp_authorization_completed`, and the sign-in's record marked
-- completed (a sign-in a test or an older worker began without one has none to mark); a run waiting on
-- it goes on, now with the grant's token (lib/run.lua sb_sign_in_ended).
--
--!layout lib/run.lua   (run_id is '')
--!key authorizations    the session's MCP sign-ins
--!arg authorization_id  the sign-in's id
--!arg grant             the grant's name
--!arg server_url        the grant's server
--!arg member            its deadline member
--
-- Returns {'ok', the event JSON}; refusal not_found (no session); refusal conflict session_full.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local body = sb_ev_mcp_authorization_completed(A.authorization_id, A.grant, A.server_url)
local full = sb_room(S.meta, S.now, #body + SB_ENTRY + 64, SB_P.cap)
if full then return full end
local raw = redis.call('HGET', K.authorizations, A.authorization_id)
local rec = raw and cjson.decode(raw)
local was = rec and rec.state
if rec then
  rec.state = 'completed'
  redis.call('HSET', K.authorizations, A.authorization_id, cjson.encode(rec))
end
redis.call('ZREM', SB_P.deadlines, A.member)
local json = sb_append(S, body)
if was == 'pending' then sb_sign_in_ended(S, rec) end
return sb_reply(json)

-- The person declines a sign-in the session asked for: the grant is not asked again in this session (its
-- steps go on without its tools), the sign-in's link no longer completes, `mcp_authorization_declined`
-- (reason `declined`) says so, and a run waiting on it goes on (lib/run.lua sb_sign_in_ended).
--
--!layout lib/run.lua   (run_id is '')
--!key authorizations    the session's MCP sign-ins
--!arg authorization_id  the sign-in's id
--!arg member            its deadline member
--
-- Returns {'ok', grant}; refusal not_found (no session, no such sign-in), conflict (it ended already:
-- completed, declined or run out; or session_full).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local raw = redis.call('HGET', K.authorizations, A.authorization_id)
if not raw or string.sub(A.authorization_id, 1, 2) == 'g:' then
  return sb_refuse('not_found', 'no_mcp_authorization_in_session', A.authorization_id)
end
local rec = cjson.decode(raw)
if rec.state ~= 'pending' then
  return sb_refuse('conflict', 'mcp_authorization_ended', A.authorization_id, rec.state)
end
if tonumber(rec.expires_at) <= S.now then
  return sb_refuse('conflict', 'mcp_authorization_ended', A.authorization_id, 'expired')
end
local body = sb_ev_mcp_authorization_declined(A.authorization_id, rec.grant, rec.server or '', 'declined')
local full = sb_room(S.meta, S.now, #body + SB_ENTRY + 64, SB_P.cap)
if full then return full end
rec.state = 'declined'
redis.call('HSET', K.authorizations, A.authorization_id, cjson.encode(rec))
redis.call('ZREM', SB_P.deadlines, A.member)
sb_append(S, body)
sb_sign_in_ended(S, rec)
return sb_reply(rec.grant)

-- A sign-in's wait ran out (its timer in the deadlines index, set when a step began to wait on it): still
-- pending, it ends as `expired` with `mcp_authorization_declined` (reason `expired`), and a run waiting on
-- it goes on without the grant's tools (lib/run.lua sb_sign_in_ended). The index is the authority: a timer
-- gone, not yet due, or of a sign-in that ended meanwhile does nothing.
--
--!layout lib/run.lua   (run_id is '')
--!key authorizations    the session's MCP sign-ins
--!arg authorization_id  the sign-in's id
--!arg member            its deadline member
--
-- Returns {'ok', 'expired' | 'not_due' | 'settled' | 'unknown'}; 'unknown': the session holds no sign-in of
-- that id (the member is a call's, whose id merely looks like one: expire_call.lua's to act on).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
local due = redis.call('ZSCORE', SB_P.deadlines, A.member)
if not due then return sb_reply('settled') end
local raw = string.sub(A.authorization_id, 1, 2) ~= 'g:' and redis.call('HGET', K.authorizations, A.authorization_id)
if not raw then return sb_reply('unknown') end
if tonumber(due) > S.now then return sb_reply('not_due') end
redis.call('ZREM', SB_P.deadlines, A.member)
local rec = cjson.decode(raw)
if rec.state ~= 'pending' or not sb_session_live(S) then return sb_reply('settled') end
rec.state = 'expired'
redis.call('HSET', K.authorizations, A.authorization_id, cjson.encode(rec))
-- Appended without a room check, as an approval's timeout is: the wait must end whatever the storage holds.
sb_append(S, sb_ev_mcp_authorization_declined(A.authorization_id, rec.grant, rec.server or '', 'expired'))
sb_sign_in_ended(S, rec)
return sb_reply('expired')

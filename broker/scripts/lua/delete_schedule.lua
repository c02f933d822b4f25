-- Removes a schedule from a session and from its partition's schedule index: it fires no more.
--
--!key meta              the session's record
--!key session_schedules the session's schedules
--!arg sid               the session id
--!arg id                the schedule id
--
-- Returns {'ok'}; refusal not_found no session, or no such schedule (an `at` schedule that fired is gone).

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = K.meta, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', A.sid) end
local raw = redis.call('HGET', K.session_schedules, A.id)
if not raw then return sb_refuse('not_found', 'no_schedule', A.id) end
redis.call('HDEL', K.session_schedules, A.id)
redis.call('ZREM', SB_P.schedules, A.sid .. ':' .. A.id)
sb_add(S.meta, -(#raw + #A.id + SB_ENTRY))
return sb_reply()

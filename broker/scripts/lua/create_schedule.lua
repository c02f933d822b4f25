-- Adds a schedule to a session: its record in the session's schedules, and its member
-- (`<sid>:<schedule id>`) in the partition's schedule index, scored by its first fire time, which rings
-- the partition's alarm when it comes first. The index's score is the schedule's next fire time, its one
-- copy (fire_schedule.lua moves it); the record does not change.
--
--!key meta              the session's record
--!key session_schedules the session's schedules (hash: schedule id -> record JSON)
--!arg sid               the session id
--!arg id                the schedule id
--!arg record            its record (JSON)
--!arg next_ms           its first fire time (ms)
--!arg max               the most schedules a session holds
--
-- Returns {'ok', 'created' | 'exists' (an id already added: a retried request)}; refusal not_found no session;
-- invalid_request the session holds `max` schedules; conflict the session's storage is full.

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = K.meta, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', A.sid) end
if redis.call('HEXISTS', K.session_schedules, A.id) == 1 then return sb_reply('exists') end
local max = tonumber(A.max)
if redis.call('HLEN', K.session_schedules) >= max then return sb_refuse('invalid_request', 'too_many_schedules', max) end
local size = #A.record + #A.id + SB_ENTRY
local full = sb_room(S.meta, S.now, size, SB_P.cap)
if full then return full end
redis.call('HSET', K.session_schedules, A.id, A.record)
sb_add(S.meta, size)
sb_timer(SB_P.schedules, tonumber(A.next_ms), A.sid .. ':' .. A.id)
return sb_reply('created')

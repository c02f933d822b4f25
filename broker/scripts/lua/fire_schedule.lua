-- Fires a due schedule once: a compare-and-set on its fire time. When the schedule's score in the
-- partition's index still equals `due_ms` (the fire time the caller read), its text is posted as the
-- session's input through the session's policy (lib/input.lua, as post_input.lua does; source `external`,
-- with `trigger: "schedule"` and `schedule_id`), and the schedule moves to `next_ms`, or, with none (an
-- `at` schedule), ends. Otherwise it changes nothing: another worker fired it, or it was deleted. Both
-- happen in this one step, so a worker that dies before it fires nothing, and one that dies after has
-- moved the schedule on: each due time fires once.
--
--!layout lib/run.lua   (run_id is the id a run the firing starts takes)
--!key session_schedules the session's schedules
--!arg id                the schedule id
--!arg input_id          the input's id
--!arg due_ms            the fire time the caller read (ms)
--!arg next_ms           the fire time after it, later than now ('' for none: the schedule ends)
--
-- Returns {'ok', 'new_run' | 'steered' | a reason the policy refused the input ('drops_input',
-- 'session_full'; the schedule still moves on) | 'stale' (not due at `due_ms`: changed nothing) | 'gone'
-- (the schedule or its session is gone: its member leaves the index)}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/client.lua
--!include lib/input.lua

local S = sb_run_context()
local member = S.sid .. ':' .. A.id
local due = tonumber(A.due_ms)
local score = redis.call('ZSCORE', SB_P.schedules, member)
if not score or tonumber(score) ~= due or due > S.now then return sb_reply('stale') end
local raw = redis.call('HGET', K.session_schedules, A.id)
if not raw or not sb_session_live(S) then
  redis.call('ZREM', SB_P.schedules, member)
  return sb_reply('gone')
end
local rec = cjson.decode(raw)
local taken = sb_take_input(S, {
  input_id = A.input_id, text = rec.text, source = 'external', scoped = '', trigger = 'schedule', schedule_id = A.id,
})
if A.next_ms == '' then
  redis.call('HDEL', K.session_schedules, A.id)
  redis.call('ZREM', SB_P.schedules, member)
  sb_add(S.meta, -(#raw + #A.id + SB_ENTRY))
else
  sb_timer(SB_P.schedules, tonumber(A.next_ms), member)
end
return sb_reply(taken[2])

-- A worker lets go of a grant's call between two requests to its server: the call is `parked`, held by
-- no worker, its record keeping what the next request needs (`gt`: the task it follows, the end of its
-- grant's timeout_s as `ov`, ms on Redis's clock), and its deadline timer set to when it is next due
-- (expire_call.lua queues it again then, for any worker to take up).
--
--!layout lib/call.lua   (cid is '')
--!arg task        the server's task id
--!arg wake_ms     when it is next due, from now (ms)
--!arg left_ms     the call's time left, from now (ms): kept the first time only
--
-- Returns {'ok', 'parked' | 'stale'} ('stale': the call is no longer this worker's: settled, e.g. cancelled).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
local gt = rec.gt or {ov = S.now + tonumber(A.left_ms)}
gt.task = A.task
-- A task's wake past the call's end is the end: the worker then cancels the task and fails the call.
local due = math.min(S.now + tonumber(A.wake_ms), gt.ov)
rec.gt = gt
rec.state = 'parked'
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_timer(SB_P.deadlines, due, S.sid .. ':' .. S.call_id)
return sb_reply('parked')

-- Reads what is due in one partition's timer indexes, and arms the partition's alarm for what comes
-- after: the timekeeper that owns the partition runs this when the alarm rings (or when it takes the
-- partition over), acts on each member returned (expire_call, lapse_client, reclaim_step, dequeue, the
-- purge, claim_work, fire_schedule), and sleeps until the time this returns. A member returned here is
-- the keeper's to act on; the alarm is set past it, and the script that acts moves or drops it (every
-- move goes through sb_timer, which rings the alarm again if it comes earlier).
--
-- The alarm is set past the members returned, so it alone would hide them from a worker taking the
-- partition over if this keeper died before acting: `handed` records that some were handed out, and
-- stays until a sweep finds nothing due (Timers.glance visits a partition holding it at once).
--
--!key handed      when a sweep last handed out due members (ms), or absent
--!arg batch       the most members returned per index
--
-- Returns {'ok', next due ms or -1 (nothing set), deadlines, leases, steps, dequeue, purges, claims,
-- schedules}: each a list of the due members of that index, oldest first.

--!include lib/core.lua
--!include lib/partition.lua

local now, batch = sb_now_ms(), tonumber(A.batch)
local reply = {'ok', -1}
local next_due = nil
local handed = false
for _, index in ipairs({SB_P.deadlines, SB_P.leases, SB_P.steps, SB_P.dequeue, SB_P.purges, SB_P.claims,
  SB_P.schedules}) do
  local due = redis.call('ZRANGE', index, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)
  reply[#reply + 1] = due
  if #due > 0 then handed = true end
  local after = redis.call('ZRANGE', index, #due, #due, 'WITHSCORES')
  if after[2] then
    local at = tonumber(after[2])
    if next_due == nil or at < next_due then next_due = at end
  end
end
if handed then
  redis.call('SET', K.handed, now)
else
  redis.call('DEL', K.handed)
end
if next_due == nil then
  redis.call('DEL', SB_P.alarm)
else
  redis.call('SET', SB_P.alarm, next_due)
  reply[2] = next_due
end
return reply

-- Reads the schedules a partition's sweep found due, for the timekeeper to fire (fire_schedule.lua): one
-- call for all of them, rather than two reads each.
--
--!key records...   each due schedule's session's schedules (hash), in order
--!arg ids...       each due schedule's `<sid>:<schedule id>` (its member in the partition's index), in order
--
-- Returns {'ok', record JSON or false, its fire time (the member's score) or false, ...}: two entries per
-- schedule, in order.

--!include lib/core.lua
--!include lib/partition.lua

local reply = {'ok'}
for i, member in ipairs(A.ids) do
  local schedule_id = string.sub(member, 38)
  reply[#reply + 1] = redis.call('HGET', K.records[i], schedule_id)
  reply[#reply + 1] = redis.call('ZSCORE', SB_P.schedules, member)
end
return reply

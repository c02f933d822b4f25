-- A work entry's claim came due: its worker took it a lease ago and never began it (it died, or hangs).
-- The entry goes to consumer `A.consumer` (XCLAIM, only if it has sat idle a whole lease) under a new claim.
-- An entry begun meanwhile (acknowledged) drops its claim; one taken again since is left to its claim.
--
-- KEYS: the partition's keys only (lib/partition.lua).
--!arg consumer    the consumer (worker) taking it over
--!arg entry       the entry id
--!arg lease_ms    the claim lease (ms)
--
-- Returns {'ok', entry id, work member} (now this consumer's) or {'ok'} (nothing to do).

--!include lib/core.lua
--!include lib/partition.lua

local now, id, lease = sb_now_ms(), A.entry, tonumber(A.lease_ms)
local pending = redis.pcall('XPENDING', SB_P.work, SB_WORK_GROUP, id, id, 1)
if type(pending) ~= 'table' or pending.err or not pending[1] then
  redis.call('ZREM', SB_P.claims, id)
  return sb_reply()
end
local idle = tonumber(pending[1][3])
if idle < lease then
  sb_timer(SB_P.claims, now + lease - idle, id)
  return sb_reply()
end
local claimed = redis.call('XCLAIM', SB_P.work, SB_WORK_GROUP, A.consumer, lease, id)
local entry = claimed[1]
if not entry or type(entry[2]) ~= 'table' then
  -- Deleted while pending: nothing left to run.
  sb_work_done(id)
  return sb_reply()
end
sb_timer(SB_P.claims, now + lease, id)
return sb_reply(id, entry[2][2])

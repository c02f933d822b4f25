-- A work entry's claim came due: its worker took it a lease ago and never began it (it died, or hangs).
-- The entry goes to consumer ARGV[1] (XCLAIM, only if it has sat idle a whole lease) under a new claim.
-- An entry begun meanwhile (acknowledged) drops its claim; one taken again since is left to its claim.
--
-- KEYS: the partition's keys only (lib/partition.lua).
-- ARGV[1] consumer  ARGV[2] entry id  ARGV[3] claim lease ms
-- Returns {0, entry id, work member} (now this consumer's) or {0} (nothing to do).

--!include lib/core.lua
--!include lib/partition.lua

local now, id, lease = sb_now_ms(), ARGV[2], tonumber(ARGV[3])
local pending = redis.pcall('XPENDING', SB_P.work, SB_WORK_GROUP, id, id, 1)
if type(pending) ~= 'table' or pending.err or not pending[1] then
  redis.call('ZREM', SB_P.claims, id)
  return {0}
end
local idle = tonumber(pending[1][3])
if idle < lease then
  sb_timer(SB_P.claims, now + lease - idle, id)
  return {0}
end
local claimed = redis.call('XCLAIM', SB_P.work, SB_WORK_GROUP, ARGV[1], lease, id)
local entry = claimed[1]
if not entry or type(entry[2]) ~= 'table' then
  -- Deleted while pending: nothing left to run.
  sb_work_done(id)
  return {0}
end
sb_timer(SB_P.claims, now + lease, id)
return {0, id, entry[2][2]}

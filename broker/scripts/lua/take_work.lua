-- Hands a worker the partition's new work entries (XREADGROUP through the group `workers`, as consumer
-- `A.consumer`), each under a claim: a timer in the claims index, due a lease from now. Beginning the work
-- (begin_step, begin_server_call, done_work) drops the claim; a worker that dies first leaves it to come
-- due, and the timekeeper gives the entry to a live worker (claim_work.lua).
--
-- KEYS: the partition's keys only (lib/partition.lua).
--!arg consumer    the consumer (the worker)
--!arg count       the most entries to take
--!arg lease_ms    the claim lease (ms)
--
-- Returns {'ok', entry id, work member, entry id, work member, ...} (maybe none).

--!include lib/core.lua
--!include lib/partition.lua

local now = sb_now_ms()
local read = redis.pcall('XREADGROUP', 'GROUP', SB_WORK_GROUP, A.consumer, 'COUNT', tonumber(A.count),
  'STREAMS', SB_P.work, '>')
if type(read) == 'table' and read.err then
  if not string.find(read.err, 'NOGROUP', 1, true) then return redis.error_reply(read.err) end
  -- The first worker to read a partition makes its group, at the stream's start: work left before it
  -- came is owed to it too.
  redis.call('XGROUP', 'CREATE', SB_P.work, SB_WORK_GROUP, '0', 'MKSTREAM')
  read = redis.call('XREADGROUP', 'GROUP', SB_WORK_GROUP, A.consumer, 'COUNT', tonumber(A.count),
    'STREAMS', SB_P.work, '>')
end
local reply = {'ok'}
if not read then return reply end
for _, entry in ipairs(read[1][2]) do
  local id, fields = entry[1], entry[2]
  sb_timer(SB_P.claims, now + tonumber(A.lease_ms), id)
  reply[#reply + 1] = id
  reply[#reply + 1] = fields[2]
end
return reply

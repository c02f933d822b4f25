-- Forgets a session's settled calls once they are older than the settled-call retention (the timekeeper,
-- when the session's trim timer `c|<session id>` in the partition's purge index comes due). The caller
-- read the event log from where the last trim stopped and names the calls whose `tool_result` is old
-- enough: a `tool_result` is appended as a call settles, so none of them is still owed. Their records
-- leave the calls hash; the call streams of the registrations that had calls lose entries older than
-- any call could still need (two ack deadlines, as at each dispatch); the timer moves on.
--
-- KEYS[1] meta  KEYS[2] calls  KEYS[3..] call streams to trim
-- ARGV[1] session id  ARGV[2] the seq the log was read to  ARGV[3] when the timer is next due (ms)
-- ARGV[4] the streams' MINID (ms)  ARGV[5..] call ids to forget (the storage cap last, lib/partition.lua)
-- What the records (and their call stream entries) counted toward the session's storage is released.
-- Returns {0, 'trimmed' | 'gone'}: 'gone' when the session no longer lives (its timer is dropped).

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = KEYS[1]}
local member = 'c|' .. ARGV[1]
if not sb_session_live(S) then
  redis.call('ZREM', SB_P.purges, member)
  return sb_reply('gone')
end
if #ARGV > 5 then
  local released = 0
  for i, raw in ipairs(redis.call('HMGET', KEYS[2], unpack(ARGV, 5, #ARGV - 1))) do
    -- As lib/core.lua counted it (sb_call_count); `sb` is a top-level number (inner JSON is escaped).
    if raw then
      released = released + #raw + #ARGV[4 + i] + SB_ENTRY + tonumber(string.match(raw, '"sb":(%d+)') or 0)
    end
  end
  redis.call('HDEL', KEYS[2], unpack(ARGV, 5, #ARGV - 1))
  sb_add(S.meta, -released)
end
-- The partition's nine keys come last (lib/partition.lua).
for i = 3, #KEYS - 9 do
  redis.call('XTRIM', KEYS[i], 'MINID', ARGV[4])
end
redis.call('HSET', S.meta, 'trimmed_seq', ARGV[2])
sb_timer(SB_P.purges, tonumber(ARGV[3]), member)
return sb_reply('trimmed')

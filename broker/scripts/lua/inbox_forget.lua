-- Marks a deleted session's inbox record `~gone` (inbox_change.lua then takes only closes, so a notice
-- replayed late opens nothing) and has it expire; answers the call ids it holds, whose open items the
-- caller then closes. Running it again (the purge after a delete) answers the same ids until it expires.
--
--!key seqs          the session's applied seqs
--!arg tombstone_ms  how long the record stays (ms)
--
-- Returns {'ok', call id...}.

--!include lib/core.lua

local ids = {'ok'}
for _, field in ipairs(redis.call('HKEYS', K.seqs)) do
  if field ~= '~gone' then ids[#ids + 1] = field end
end
if redis.call('HGET', K.seqs, '~gone') ~= '1' then
  redis.call('HSET', K.seqs, '~gone', '1')
  redis.call('PEXPIRE', K.seqs, tonumber(A.tombstone_ms))
end
-- Built as the reply itself: a session may hold more ids than unpack takes.
return ids

-- Opens or closes one inbox item (broker/services/inbox.py), every index it is in at once. Notices may
-- come twice or late, so each call applies only a notice newer (by seq) than the last one applied to the
-- same call: a close replayed after a later open, or an open replayed after its close, changes nothing.
-- A session once deleted (`~gone`, inbox_forget.lua) takes closes only. The caller read the item first
-- (to name its indexes); when it changed since, nothing is written and the caller reads it again.
--
--!key items       every open item's JSON, by `<sid>|<call id>`
--!key seqs        the session's applied seqs (`call id -> seq`, `~gone`)
--!key indexes...  the indexes holding the item as read (the first `drop`), then the new item's
--!arg field       `<sid>|<call id>`
--!arg call_id     call id
--!arg seq         the notice's seq
--!arg expect      the item's JSON as the caller read it ('' for none)
--!arg old         that item's index member ('' for none)
--!arg drop        how many of `indexes` hold `old`
--!arg member      the new item's index member ('' to close)
--!arg item        the new item's JSON ('' to close)
--
-- Returns {'ok', 'applied' | 'stale' | 'gone' | 'retry'}.

--!include lib/core.lua

local gone = redis.call('HGET', K.seqs, '~gone') == '1'
if gone and A.member ~= '' then return sb_reply('gone') end
local seq = tonumber(A.seq)
if not gone and seq <= tonumber(redis.call('HGET', K.seqs, A.call_id) or '0') then return sb_reply('stale') end
if (redis.call('HGET', K.items, A.field) or '') ~= A.expect then return sb_reply('retry') end
local drop = tonumber(A.drop)
if A.old ~= '' then
  for i = 1, drop do redis.call('ZREM', K.indexes[i], A.old) end
end
if A.member == '' then
  redis.call('HDEL', K.items, A.field)
else
  for i = drop + 1, #K.indexes do redis.call('ZADD', K.indexes[i], 0, A.member) end
  redis.call('HSET', K.items, A.field, A.item)
end
if not gone then redis.call('HSET', K.seqs, A.call_id, seq) end
return sb_reply('applied')

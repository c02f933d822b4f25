-- The workers alive now: each calls this every quarter lease, which keeps it in the set for `stay_ms`
-- (three quarters of a lease), drops those whose time ran out, and answers the live ones. Every worker derives the partitions it
-- owns from that list (workers/keeper.py), so a worker that stops calling loses its partitions to the
-- others within a lease. Also refreshes the worker's health key (`switchboard worker --check`).
--
--!key keepers    the keepers set (zset, scored by lease end ms)
--!key health     this host's health key
--!arg worker     worker id
--!arg stay_ms    ms to stay ('0': the worker leaves now, and takes its health key with it)
--!arg health_ms  health key ttl ms
--
-- Returns {'ok', Redis's time in ms, the ids of the live workers in id order...}.

--!include lib/core.lua

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if A.stay_ms == '0' then
  redis.call('ZREM', K.keepers, A.worker)
  if redis.call('GET', K.health) == A.worker then redis.call('DEL', K.health) end
else
  redis.call('ZADD', K.keepers, now + tonumber(A.stay_ms), A.worker)
  redis.call('SET', K.health, A.worker, 'PX', tonumber(A.health_ms))
end
redis.call('ZREMRANGEBYSCORE', K.keepers, '-inf', now)
local live = redis.call('ZRANGE', K.keepers, 0, -1)
table.sort(live)
table.insert(live, 1, now)
table.insert(live, 1, 'ok')
return live

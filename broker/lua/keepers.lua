-- The workers alive now: each calls this every quarter lease, which keeps it in the set for ARGV[2] ms
-- (three quarters of a lease), drops those whose time ran out, and answers the live ones. Every worker derives the partitions it
-- owns from that list (workers/keeper.py), so a worker that stops calling loses its partitions to the
-- others within a lease. Also refreshes the worker's health key (`switchboard worker --check`).
--
-- KEYS[1] the keepers set (zset, scored by lease end ms)  KEYS[2] this host's health key
-- ARGV[1] worker id  ARGV[2] ms to stay ('0': the worker leaves now, and takes its health key with it)
-- ARGV[3] health key ttl ms
-- Returns {Redis's time in ms, the ids of the live workers in id order...}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] == '0' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[3]))
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(live)
table.insert(live, 1, now)
return live

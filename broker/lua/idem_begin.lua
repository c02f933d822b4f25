-- Claims an Idempotency-Key for one attempt. The record keeps the request's fingerprint and the values
-- the first attempt chose (ids), so an attempt that takes over from one that died acts on the same ids.
--
-- KEYS[1] the receipt key
-- ARGV[1] fingerprint  ARGV[2] attempt id  ARGV[3] lease ms  ARGV[4] seed JSON  ARGV[5] receipt ttl ms
-- Returns {'run', seed JSON} (this attempt acts), {'wait'} (another attempt is acting),
-- {'replay', status, body}, or {'conflict'} (the key was used with another request).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raw = redis.call('GET', KEYS[1])
if not raw then
  redis.call('SET', KEYS[1], cjson.encode({fp = ARGV[1], owner = ARGV[2], lease = now + tonumber(ARGV[3]),
    seed = ARGV[4]}), 'PX', ARGV[5])
  return {'run', ARGV[4]}
end
local rec = cjson.decode(raw)
if rec.fp ~= ARGV[1] then return {'conflict'} end
if rec.status then return {'replay', tostring(rec.status), rec.body} end
if rec.lease > now then return {'wait'} end
rec.owner = ARGV[2]
rec.lease = now + tonumber(ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return {'run', rec.seed}

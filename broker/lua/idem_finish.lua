-- Settles an Idempotency-Key with the response of the attempt that holds it, or releases it (status 0)
-- so the next attempt acts again (the first one failed in a way worth retrying). A session route's
-- receipt counts what it grows by toward its session's storage (idem_begin.lua).
--
-- KEYS[1] the receipt key  KEYS[2] the session's meta (absent for a workspace route's receipt)
-- ARGV[1] attempt id  ARGV[2] HTTP status, or 0 to release  ARGV[3] body  ARGV[4] receipt ttl ms
-- Returns 1 when written, 0 when another attempt holds the key now.

--!include lib/core.lua

local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local rec = cjson.decode(raw)
if rec.owner ~= ARGV[1] or rec.status then return 0 end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
  return 1
end
local record = cjson.encode({fp = rec.fp, status = tonumber(ARGV[2]), body = ARGV[3]})
redis.call('SET', KEYS[1], record, 'PX', ARGV[4])
if KEYS[2] then sb_add_receipt(KEYS[2], sb_now_ms(), ARGV[4], #record - #raw) end
return 1

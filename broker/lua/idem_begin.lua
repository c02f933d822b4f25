-- Claims an Idempotency-Key for one attempt. The record keeps the request's fingerprint and the values
-- the first attempt chose (ids), so an attempt that takes over from one that died acts on the same ids.
-- A session route's receipt counts toward its session's storage (lib/core.lua sb_add_receipt): with no
-- room for it the key is not claimed and the request is refused.
--
-- KEYS[1] the receipt key  KEYS[2] the session's meta (absent for a workspace route's receipt)
-- ARGV[1] fingerprint  ARGV[2] attempt id  ARGV[3] lease ms  ARGV[4] seed JSON  ARGV[5] receipt ttl ms
-- ARGV[6] SWITCHBOARD_MAX_SESSION_BYTES (with KEYS[2])
-- Returns {'run', seed JSON} (this attempt acts), {'wait'} (another attempt is acting),
-- {'replay', status, body}, {'conflict'} (the key was used with another request), or {'full', message}
-- (the session's storage has no room).

--!include lib/core.lua

local now = sb_now_ms()
local raw = redis.call('GET', KEYS[1])
if not raw then
  local record = cjson.encode({fp = ARGV[1], owner = ARGV[2], lease = now + tonumber(ARGV[3]), seed = ARGV[4]})
  local meta = KEYS[2]
  if meta then
    local size = #record + #KEYS[1] + SB_KEY
    -- Room for the answer the receipt will hold, too.
    local full = sb_room(meta, now, size + 1024, ARGV[6])
    if full then return {'full', full} end
    sb_add_receipt(meta, now, ARGV[5], size)
  end
  redis.call('SET', KEYS[1], record, 'PX', ARGV[5])
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

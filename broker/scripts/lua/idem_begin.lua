-- Claims an Idempotency-Key for one attempt. The record keeps the request's fingerprint and the values
-- the first attempt chose (ids), so an attempt that takes over from one that died acts on the same ids.
-- A session route's receipt counts toward its session's storage (lib/core.lua sb_add_receipt): with no
-- room for it the key is not claimed and the request is refused.
--
--!key receipt         the receipt key
--!key session_meta...  the session's meta, one key (none for a workspace route's receipt)
--!arg fp              fingerprint
--!arg attempt         attempt id
--!arg lease_ms        lease ms
--!arg seed            seed JSON
--!arg ttl_ms          receipt ttl ms
--!arg max_bytes       SWITCHBOARD_MAX_SESSION_BYTES (with session_meta)
--
-- Returns {'ok', 'run', seed JSON} (this attempt acts), {'ok', 'wait'} (another attempt is acting),
-- {'ok', 'replay', outcome, body} (the outcome as the first attempt's caller named it; a receipt of an
-- earlier release holds its number there instead); refusals: conflict (`key_reused`: the key was used
-- with another request; `session_full`: the session's storage has no room).

--!include lib/core.lua

local now = sb_now_ms()
local raw = redis.call('GET', K.receipt)
if not raw then
  local lease = now + tonumber(A.lease_ms)
  local record = cjson.encode({fp = A.fp, owner = A.attempt, lease = lease, seed = A.seed})
  local meta = K.session_meta[1]
  if meta then
    local size = #record + #K.receipt + SB_KEY
    -- Room for the answer the receipt will hold, too.
    local full = sb_room(meta, now, size + 1024, A.max_bytes)
    if full then return full end
    sb_add_receipt(meta, now, A.ttl_ms, size)
  end
  redis.call('SET', K.receipt, record, 'PX', A.ttl_ms)
  return sb_reply('run', A.seed)
end
local rec
if string.sub(raw, 1, 1) == '{' then
  rec = cjson.decode(raw)
else
  -- A settled workspace receipt (idem_finish.lua).
  local outcome, fp, body = string.match(raw, '^(%S+) (%S+) (.*)$')
  rec = {fp = fp, outcome = outcome, body = body}
end
if rec.fp ~= A.fp then return sb_refuse('conflict', 'key_reused') end
if rec.outcome then return sb_reply('replay', rec.outcome, rec.body) end
if rec.status then return sb_reply('replay', tostring(rec.status), rec.body) end
if rec.lease > now then return sb_reply('wait') end
rec.owner = A.attempt
rec.lease = now + tonumber(A.lease_ms)
redis.call('SET', K.receipt, cjson.encode(rec), 'KEEPTTL')
return sb_reply('run', rec.seed)

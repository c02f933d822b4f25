-- Settles an Idempotency-Key with the response of the attempt that holds it, or releases it (status 0)
-- so the next attempt acts again (the first one failed in a way worth retrying). A session route's
-- receipt counts what it grows by toward its session's storage (idem_begin.lua).
--
--!key receipt         the receipt key
--!key session_meta...  the session's meta, one key (none for a workspace route's receipt)
--!arg attempt         attempt id
--!arg status          HTTP status, or 0 to release
--!arg body            body
--!arg ttl_ms          receipt ttl ms
--
-- Returns 1 when written, 0 when another attempt holds the key now.

--!include lib/core.lua

local raw = redis.call('GET', K.receipt)
if not raw then return 0 end
local rec = cjson.decode(raw)
if rec.owner ~= A.attempt or rec.status then return 0 end
if A.status == '0' then
  redis.call('DEL', K.receipt)
  return 1
end
local record = cjson.encode({fp = rec.fp, status = tonumber(A.status), body = A.body})
redis.call('SET', K.receipt, record, 'PX', A.ttl_ms)
local meta = K.session_meta[1]
if meta then sb_add_receipt(meta, sb_now_ms(), A.ttl_ms, #record - #raw) end
return 1

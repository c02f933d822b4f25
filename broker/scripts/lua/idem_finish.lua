-- Settles an Idempotency-Key with the answer of the attempt that holds it, or releases it (no outcome)
-- so the next attempt acts again (the first one failed in a way worth retrying). A session route's
-- receipt counts what it grows by toward its session's storage (idem_begin.lua).
--
--!key receipt         the receipt key
--!key session_meta...  the session's meta, one key (none for a workspace route's receipt)
--!arg attempt         attempt id
--!arg outcome         how it ended, as the caller names it ('' to release)
--!arg body            body
--!arg ttl_ms          receipt ttl ms
--
-- Returns {'ok', 1} when written, {'ok', 0} when another attempt holds the key now.

--!include lib/core.lua

local raw = redis.call('GET', K.receipt)
if not raw then return sb_reply(0) end
local rec = cjson.decode(raw)
if rec.owner ~= A.attempt or rec.outcome or rec.status then return sb_reply(0) end
if A.outcome == '' then
  redis.call('DEL', K.receipt)
  return sb_reply(1)
end
local record = cjson.encode({fp = rec.fp, outcome = A.outcome, body = A.body})
redis.call('SET', K.receipt, record, 'PX', A.ttl_ms)
local meta = K.session_meta[1]
if meta then sb_add_receipt(meta, sb_now_ms(), A.ttl_ms, #record - #raw) end
return sb_reply(1)

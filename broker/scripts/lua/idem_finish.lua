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
-- A settled workspace receipt is `<outcome> <fp> <body>`; only a claim (JSON) may be settled.
if not raw or string.sub(raw, 1, 1) ~= '{' then return sb_reply(0) end
local rec = cjson.decode(raw)
if rec.owner ~= A.attempt or rec.outcome or rec.status then return sb_reply(0) end
if A.outcome == '' then
  redis.call('DEL', K.receipt)
  return sb_reply(1)
end
local meta = K.session_meta[1]
local record
if meta then
  -- lib/hot.lua reads a session route's receipt too, as this JSON.
  record = cjson.encode({fp = rec.fp, outcome = A.outcome, body = A.body})
else
  -- A workspace route's, as `<outcome> <fp> <body>`: the body not escaped into a second document (a
  -- created session's receipt is 467 bytes rather than 533: a 512-byte allocation rather than 640).
  record = A.outcome .. ' ' .. rec.fp .. ' ' .. A.body
end
redis.call('SET', K.receipt, record, 'PX', A.ttl_ms)
if meta then sb_add_receipt(meta, sb_now_ms(), A.ttl_ms, #record - #raw) end
return sb_reply(1)

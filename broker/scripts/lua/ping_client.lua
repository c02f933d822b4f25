-- Keeps a ttl registration alive until now + ttl. Answers as a hot route (lib/hot.lua). The lease index is not
-- touched: its entry, due at the old expiry, is moved on by the timekeeper when it comes due
-- (lapse_client.lua), so a ping costs one field.
--
-- A ping is the call a deployment makes most, and most of a small script's cost is the keys and
-- arguments it is handed, so it takes only what a ping that succeeds reads. A registration whose lease
-- has already run out is refused here and lapsed by the caller at once (lapse_client.lua, which has the
-- session's other keys), before the refusal is answered.
--
--!key meta      the session's meta
--!key client    the registration
--!layout lib/hot.lua
--!arg sid       the session id
--!arg cid       the client id
-- Returns {'ok', {"expires_at"} (null for never)}; refusals: not_found (`ping_no_client` when the
-- registration is gone, `ping_lapsed` when its lease ran out and it must be lapsed now), unauthorized.
-- A ping stores nothing that lasts, so it is never refused for the session's storage, and its receipt
-- (5 minutes) is not counted toward it (lib/hot.lua).

--!include lib/core.lua
--!include lib/hot.lua

local S = {meta = K.meta, sid = A.sid, now = sb_now_ms()}
-- Not sb_hot_context: a ping has no partition (no SB_P), and its receipt is not counted toward the cap.
local H = {tokens = K.tokens, receipt = K.receipt, token = A.token, fp = A.fp, ttl = A.ttl, uncounted = true}
local early = sb_hot_begin(S, H)
if early then return early end
local client = redis.call('HMGET', K.client, 'state', 'ttl_ms', 'expires_at')
if client[1] ~= 'active' then return sb_hot_keep(S, H, sb_refuse('not_found', 'ping_no_client', A.cid)) end
local ttl = tonumber(client[2])
if ttl == 0 then return sb_hot_reply(S, H, '{"expires_at":null}') end
if tonumber(client[3]) <= S.now then
  return sb_hot_keep(S, H, sb_refuse('not_found', 'ping_lapsed', A.cid))
end
local expires = S.now + ttl
redis.call('HSET', K.client, 'expires_at', expires)
return sb_hot_reply(S, H, '{"expires_at":"' .. sb_iso(expires * 1000) .. '"}')

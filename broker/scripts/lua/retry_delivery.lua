-- A delivery sent again at once, with the same id, its retry schedule counted afresh.
--
--!key schedule      the workspace's schedule of endpoints (webhooks-due)
--!key endpoint      the endpoint's hash
--!key log           its log
--!key deliveries    its deliveries
--!key due           its due index
--!key sending       its sending index
--!arg id            endpoint id
--!arg delivery      delivery id
--!arg cap           deliveries of one endpoint in flight at once
--
-- Returns {'ok', the record JSON}, or a refusal: no_webhook, no_delivery, delivery_sending.

--!include lib/core.lua
--!include lib/webhooks.lua

local now = sb_now_ms()
if redis.call('EXISTS', K.endpoint) == 0 then return sb_refuse('not_found', 'no_webhook', A.id) end
local rec = SBW.read(K, A.delivery)
if not rec then return sb_refuse('not_found', 'no_delivery', A.delivery) end
local lease = redis.call('ZSCORE', K.sending, A.delivery)
if lease and tonumber(lease) > now then return sb_refuse('conflict', 'delivery_sending', A.delivery) end
rec.status, rec.base, rec.next_attempt_at = 'pending', rec.attempts, now
SBW.write(K, rec)
redis.call('ZADD', K.due, now, A.delivery)
SBW.place(K, A.id, K.schedule, tonumber(A.cap), now)
return sb_reply(cjson.encode(rec))

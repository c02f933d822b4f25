-- Removes a webhook endpoint with its deliveries and subscriptions.
--
--!key index       the workspace's endpoint ids
--!key schedule    the workspace's schedule of endpoints (webhooks-due)
--!key endpoint    the endpoint's hash
--!key log         its log
--!key deliveries  its deliveries
--!key due         its due index
--!key sending     its sending index
--!key types...    the subscription set of every webhook event type
--!arg id          endpoint id
--
-- Returns {'ok'}, or a refusal: no_webhook.

--!include lib/core.lua

if redis.call('ZREM', K.index, A.id) == 0 then return sb_refuse('not_found', 'no_webhook', A.id) end
redis.call('ZREM', K.schedule, A.id)
redis.call('DEL', K.endpoint, K.log, K.deliveries, K.due, K.sending)
for _, set in ipairs(K.types) do redis.call('SREM', set, A.id) end
return sb_reply()

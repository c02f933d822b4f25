-- Adds a webhook endpoint, unless the workspace has `cap` already; it is subscribed to each type of
-- `events` (the sets `types...`, named in `names` in the same order).
--
--!key index       the workspace's endpoint ids (zset)
--!key endpoint    the endpoint's hash
--!key types...    the subscription set of every webhook event type, in the order of `names`
--!arg id          endpoint id
--!arg fields      the endpoint's fields (JSON object of strings)
--!arg names       the webhook event types (JSON list), the order of `types`
--!arg events      the types subscribed to (JSON list)
--!arg cap         the most endpoints a workspace has
--
-- Returns {'ok', created_at ms}, or a refusal: too_many_webhooks.

--!include lib/core.lua
--!include lib/webhooks.lua

local now = sb_now_ms()
local cap = tonumber(A.cap)
if redis.call('ZCARD', K.index) >= cap then return sb_refuse('invalid_request', 'too_many_webhooks', cap) end
local fields = cjson.decode(A.fields)
local args = {'id', A.id, 'created_at', now, 'enabled', '1', 'disabled_reason', '', 'events', A.events}
for name, value in pairs(fields) do
  args[#args + 1] = name
  args[#args + 1] = value
end
redis.call('HSET', K.endpoint, unpack(args))
redis.call('ZADD', K.index, 0, A.id)
SBW.subscribe(K.types, cjson.decode(A.names), cjson.decode(A.events), A.id)
return sb_reply(now)

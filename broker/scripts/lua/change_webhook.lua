-- Changes what is given of a webhook endpoint; `enabled` '1' turns it back on (its disabled reason
-- cleared, its pending deliveries placed again), '0' turns it off.
--
--!key schedule    the workspace's schedule of endpoints (webhooks-due)
--!key endpoint    the endpoint's hash
--!key log         its log
--!key deliveries  its deliveries
--!key due         its due index
--!key sending     its sending index
--!key types...    the subscription set of every webhook event type, in the order of `names`
--!arg id          endpoint id
--!arg fields      the fields to set (JSON object of strings)
--!arg names       the webhook event types (JSON list), the order of `types`
--!arg events      the types subscribed to now (JSON list), or '' to leave them
--!arg enabled     '1', '0', or '' to leave it
--!arg reason      the disabled reason when `enabled` is '0'
--!arg cap         deliveries of one endpoint in flight at once
--
-- Returns {'ok'}, or a refusal: no_webhook.

--!include lib/core.lua
--!include lib/webhooks.lua

local now = sb_now_ms()
if redis.call('EXISTS', K.endpoint) == 0 then return sb_refuse('not_found', 'no_webhook', A.id) end
local args = {}
for name, value in pairs(cjson.decode(A.fields)) do
  args[#args + 1] = name
  args[#args + 1] = value
end
if A.events ~= '' then
  args[#args + 1], args[#args + 2] = 'events', A.events
  SBW.subscribe(K.types, cjson.decode(A.names), cjson.decode(A.events), A.id)
end
if A.enabled == '1' then
  args[#args + 1], args[#args + 2], args[#args + 3], args[#args + 4] = 'enabled', '1', 'disabled_reason', ''
elseif A.enabled == '0' then
  args[#args + 1], args[#args + 2], args[#args + 3], args[#args + 4] = 'enabled', '0', 'disabled_reason', A.reason
end
if args[1] then redis.call('HSET', K.endpoint, unpack(args)) end
SBW.place(K, A.id, K.schedule, tonumber(A.cap), now)
return sb_reply()

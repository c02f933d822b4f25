-- Records how a delivery's attempt ended: `succeeded`, `retry` (pending again, due `delay_ms` from now),
-- `failed`, or `gone` (failed, and the endpoint disabled: it answered 410). An attempt that is not the
-- delivery's latest (its lease lapsed and another worker took it again) records nothing.
--
--!key schedule      the workspace's schedule of endpoints (webhooks-due)
--!key endpoint      the endpoint's hash
--!key log           its log
--!key deliveries    its deliveries
--!key due           its due index
--!key sending       its sending index
--!arg id            endpoint id
--!arg delivery      delivery id
--!arg attempt       the attempt's number
--!arg outcome       succeeded | retry | failed | gone
--!arg status_code   the HTTP status answered ('' for none)
--!arg error         what went wrong ('' for nothing)
--!arg delay_ms      for `retry`: how long until the next attempt
--!arg reason        for `gone`: the endpoint's disabled reason
--!arg cap           deliveries of one endpoint in flight at once
--
-- Returns {'ok', the delivery's status} or {'ok'} (nothing recorded).

--!include lib/core.lua
--!include lib/webhooks.lua

local now = sb_now_ms()
local rec = SBW.read(K, A.delivery)
if not rec or rec.status ~= 'pending' or rec.attempts ~= tonumber(A.attempt) then return sb_reply() end
redis.call('ZREM', K.sending, A.delivery)
rec.last_status_code = A.status_code ~= '' and tonumber(A.status_code) or cjson.null
rec.last_error = A.error ~= '' and A.error or cjson.null
if A.outcome == 'retry' then
  rec.next_attempt_at = now + tonumber(A.delay_ms)
  redis.call('ZADD', K.due, rec.next_attempt_at, A.delivery)
else
  rec.status = A.outcome == 'succeeded' and 'succeeded' or 'failed'
  rec.next_attempt_at = cjson.null
  redis.call('ZREM', K.due, A.delivery)
  if A.outcome == 'gone' then redis.call('HSET', K.endpoint, 'enabled', '0', 'disabled_reason', A.reason) end
end
SBW.write(K, rec)
SBW.place(K, A.id, K.schedule, tonumber(A.cap), now)
return sb_reply(rec.status)

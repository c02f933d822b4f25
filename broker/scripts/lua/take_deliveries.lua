-- Takes the due deliveries of the endpoints given, at most `cap` of an endpoint in flight at once and
-- `most` in all, each under a lease: its attempt counted, and it is due again and in flight until the
-- lease ends, so a worker that dies mid-send leaves it to be sent again, and none is sent by two at once
-- (an outcome recorded for an attempt that is not the delivery's last is ignored: record_delivery.lua).
--
--!key schedule      the workspace's schedule of endpoints (webhooks-due)
--!key endpoints...  five keys per endpoint (broker/keys.py WebhookKeys.block)
--!arg cap           deliveries of one endpoint in flight at once
--!arg lease_ms      how long a taken delivery is held (longer than an attempt may take)
--!arg most          the most deliveries to take
--
-- Returns {'ok', then per delivery: endpoint id, url, secret, delivery id, attempt, attempts since a manual
-- retry, type, body}.

--!include lib/core.lua
--!include lib/webhooks.lua

local now, cap, lease, left = sb_now_ms(), tonumber(A.cap), tonumber(A.lease_ms), tonumber(A.most)
local reply = {'ok'}
for at = 1, #K.endpoints, 5 do
  local E = SBW.endpoint(K.endpoints, at)
  local found = redis.call('HMGET', E.endpoint, 'id', 'url', 'secret', 'enabled')
  local id = found[1]
  if id and found[4] == '1' and left > 0 then
    local room = math.min(SBW.room(E, cap, now), left)
    if room > 0 then
      for _, delivery_id in ipairs(redis.call('ZRANGEBYSCORE', E.due, '-inf', now, 'LIMIT', 0, room)) do
        local rec = SBW.read(E, delivery_id)
        if rec and rec.status == 'pending' then
          SBW.take(E, found, rec, now, lease, reply)
          left = left - 1
        else
          redis.call('ZREM', E.due, delivery_id)
        end
      end
    end
  end
  if id then SBW.place(E, id, K.schedule, cap, now) end
end
return reply

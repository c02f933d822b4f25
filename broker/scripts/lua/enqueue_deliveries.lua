-- Writes a notable event's delivery for each endpoint it concerns (enabled, subscribed to its type, its
-- subject and agent filters met), due now. A delivery's id is derived from (endpoint, session, seq), so a
-- notice handed over twice (its worker died before it was done) writes nothing the second time. A test
-- delivery (`test_id`) goes to the one endpoint given, filters aside. Up to `most` of the deliveries
-- written are taken at once for the caller to send (as take_deliveries.lua takes them, room allowing):
-- the fast path, with no look at the schedule between an event and its first attempt.
--
--!key schedule      the workspace's schedule of endpoints (webhooks-due)
--!key endpoints...  five keys per endpoint (broker/keys.py WebhookKeys.block)
--!arg kind          the webhook event type
--!arg sid           session id ('' for a test)
--!arg seq           the event's seq ('' for a test)
--!arg subject       the session's subject ('' for none)
--!arg agent_id      the session's agent
--!arg body          the body to send
--!arg keep          deliveries kept per endpoint (its log is trimmed to this)
--!arg cap           deliveries of one endpoint in flight at once
--!arg test_id       a test delivery's id, or ''
--!arg most          how many of them to take now (0: none)
--!arg lease_ms      how long one taken is held
--
-- Returns {'ok', deliveries written, then per delivery taken: endpoint id, url, secret, delivery id, attempt,
-- attempts since a manual retry, type, body}.

--!include lib/core.lua
--!include lib/webhooks.lua

local now, keep, cap = sb_now_ms(), tonumber(A.keep), tonumber(A.cap)
local left, lease = tonumber(A.most), tonumber(A.lease_ms)
local quoted = '"' .. A.kind .. '"'
local written, taken = 0, {}
for at = 1, #K.endpoints, 5 do
  local E = SBW.endpoint(K.endpoints, at)
  local found = redis.call('HMGET', E.endpoint, 'id', 'url', 'secret', 'enabled', 'events', 'subject', 'agent_id')
  local id, delivery_id = found[1], A.test_id
  local wanted = id and (delivery_id ~= '' or (found[4] == '1'
    and string.find(found[5] or '', quoted, 1, true) ~= nil
    and (found[6] == false or found[6] == '' or found[6] == A.subject)
    and (found[7] == false or found[7] == '' or found[7] == A.agent_id)))
  if wanted then
    if delivery_id == '' then
      delivery_id = 'msg_' .. string.sub(redis.sha1hex(id .. '|' .. A.sid .. '|' .. A.seq), 1, 32)
    end
    if redis.call('HEXISTS', E.deliveries, delivery_id) == 0 then
      local rec = SBW.add(E, delivery_id, A.kind, A.body, keep, now)
      written = written + 1
      if left > 0 and found[4] == '1' and SBW.room(E, cap, now) > 0 then
        SBW.take(E, found, rec, now, lease, taken)
        left = left - 1
      end
      SBW.place(E, id, K.schedule, cap, now)
    end
  end
end
table.insert(taken, 1, sb_int(written))
table.insert(taken, 1, 'ok')
return taken

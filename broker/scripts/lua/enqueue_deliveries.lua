-- Writes a notable event's delivery for each endpoint it concerns (enabled, subscribed to its type, its
-- subject and agent filters met), due now. A delivery's id is derived from (endpoint, session, seq), so a
-- notice handed over twice (its worker died before it was done) writes nothing the second time. A test
-- delivery (`test_id`) goes to the one endpoint given, filters aside.
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
--
-- Returns {'ok', endpoint id, delivery id, ...} for each delivery written.

--!include lib/core.lua
--!include lib/webhooks.lua

local now, keep, cap = sb_now_ms(), tonumber(A.keep), tonumber(A.cap)
local quoted = '"' .. A.kind .. '"'
local reply = {'ok'}
for at = 1, #K.endpoints, 5 do
  local E = SBW.endpoint(K.endpoints, at)
  local found = redis.call('HMGET', E.endpoint, 'id', 'enabled', 'events', 'subject', 'agent_id')
  local id, delivery_id = found[1], A.test_id
  local wanted = id and (delivery_id ~= '' or (found[2] == '1'
    and string.find(found[3] or '', quoted, 1, true) ~= nil
    and (found[4] == false or found[4] == '' or found[4] == A.subject)
    and (found[5] == false or found[5] == '' or found[5] == A.agent_id)))
  if wanted then
    if delivery_id == '' then
      delivery_id = 'msg_' .. string.sub(redis.sha1hex(id .. '|' .. A.sid .. '|' .. A.seq), 1, 32)
    end
    if redis.call('HEXISTS', E.deliveries, delivery_id) == 0 then
      SBW.add(E, delivery_id, A.kind, A.body, keep, now)
      SBW.place(E, id, K.schedule, cap, now)
      reply[#reply + 1] = id
      reply[#reply + 1] = delivery_id
    end
  end
end
return reply

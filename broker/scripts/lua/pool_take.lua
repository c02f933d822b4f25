-- Hands a pool member the calls of its registration that are waiting for one: those delivered to no
-- member yet, and (when `reclaim` is 1) those another member took but has not acked within the claim
-- interval (XAUTOCLAIM). Each call goes to exactly one member: the consumer group delivers an entry to
-- one consumer, and the call record names the member holding it, which the ack checks. Entries whose
-- call is no longer waiting for an ack (acked, answered, failed) are acknowledged in the group and
-- skipped, so a member is never handed a call it could not ack.
--
--!key stream    the registration's call stream
--!key calls     the session's calls
--!key client    the registration
--!key meta      the session's meta
--!arg group     the pool's consumer group
--!arg member    the member (consumer name)
--!arg sid       the session id
--!arg cid       the client id
--!arg prefetch  most calls the member may hold unacked at once
--!arg reclaim   1 to reclaim idle entries too
--!arg claim_ms  the claim interval (ms)
-- Returns {'ok', event, ...}: the `client_tool_dispatched` events handed over (maybe none);
-- refusal not_found when the session or the registration is gone (the member's stream ends).

--!include lib/core.lua

local stream, calls = K.stream, K.calls
local group, member, cid, count = A.group, A.member, A.cid, tonumber(A.prefetch)
if redis.call('HGET', K.meta, 'deleted') == '1' or redis.call('EXISTS', K.meta) == 0 then
  return sb_refuse('not_found', 'no_session', A.sid)
end
if redis.call('HGET', K.client, 'state') ~= 'active' then return sb_refuse('not_found', 'pool_no_client', cid) end

-- A member is handed no more than it may hold: a busy member leaves calls to the free ones. The first
-- member of a pool finds no group yet and creates it, at the stream's beginning: calls dispatched before
-- any member came are owed to the pool too, and every entry is checked against its call below.
local held = redis.pcall('XPENDING', stream, group, '-', '+', count, member)
if type(held) == 'table' and held.err then
  if not string.find(held.err, 'NOGROUP', 1, true) then return redis.error_reply(held.err) end
  redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
  held = {}
end
local room = count - #held
local entries = {}
if room > 0 and A.reclaim == '1' then
  local claimed = redis.call('XAUTOCLAIM', stream, group, member, A.claim_ms, '0-0', 'COUNT', room)
  for _, entry in ipairs(claimed[2]) do entries[#entries + 1] = entry end
end
if room > #entries then
  local fresh = redis.call('XREADGROUP', 'GROUP', group, member, 'COUNT', room - #entries, 'STREAMS', stream, '>')
  if fresh then
    for _, entry in ipairs(fresh[1][2]) do entries[#entries + 1] = entry end
  end
end

local handed = {'ok'}
for _, entry in ipairs(entries) do
  local id, fields = entry[1], entry[2]
  local call_id, event
  -- Redis 6.2 answers an entry trimmed away while pending with no fields.
  if type(fields) ~= 'table' then fields = {} end
  for i = 1, #fields, 2 do
    if fields[i] == 'call' then call_id = fields[i + 1] elseif fields[i] == 'e' then event = fields[i + 1] end
  end
  local raw = call_id and redis.call('HGET', calls, call_id)
  local rec = raw and sb_read_call(calls, call_id, raw)
  -- A call sent to this registration again (it waited for its client) is handed by its newest entry only.
  if rec and rec.client == cid and rec.state == 'dispatched' and rec.entry == id then
    rec.member = member
    sb_put_call(K.meta, calls, call_id, rec)
    handed[#handed + 1] = event
  else
    redis.call('XACK', stream, group, id)
  end
end
return handed

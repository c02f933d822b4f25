-- Library: webhook endpoints and their deliveries, all in the workspace's slot `{w}`. Needs lib/core.lua.
--
-- An endpoint is handed to a script as five keys (broker/keys.py WebhookKeys.block), named `endpoint`,
-- `log`, `deliveries`, `due`, `sending` (a script declaring them so hands its `K` as the endpoint): its hash, its log
-- (delivery ids by creation ms), its deliveries (hash: id -> record JSON, `<id>:body` -> the body), its
-- due index (pending ids by next attempt ms; a taken one by its lease's end, so a worker that dies
-- mid-send leaves it due again) and its sending index (ids taken, by lease end: how many are in flight).
-- The workspace's schedule (`webhooks-due`) holds each endpoint by when it next has something to send
-- and room to send it, so a worker reads only endpoints with work, and a slow endpoint's backlog never
-- stands in front of another's.
--
-- One table, not locals: the Functions library's chunk is near Lua's 200 locals.
local SBW = {}

-- The endpoint at `keys[at]`...`keys[at + 4]` of a list of endpoints' keys.
function SBW.endpoint(keys, at)
  return {endpoint = keys[at], log = keys[at + 1], deliveries = keys[at + 2], due = keys[at + 3],
    sending = keys[at + 4]}
end

-- Places endpoint `E` (id `id`) on `schedule`: due at its earliest pending delivery, or, when `cap`
-- deliveries are in flight already, no sooner than the first of their leases ends (a send ending sooner
-- places it again); off the schedule when it has nothing pending or is disabled.
function SBW.place(E, id, schedule, cap, now)
  redis.call('ZREMRANGEBYSCORE', E.sending, '-inf', now)
  local first = redis.call('ZRANGE', E.due, 0, 0, 'WITHSCORES')
  if first[1] == nil or redis.call('HGET', E.endpoint, 'enabled') ~= '1' then
    redis.call('ZREM', schedule, id)
    return
  end
  local at = tonumber(first[2])
  if redis.call('ZCARD', E.sending) >= cap then
    local lease = redis.call('ZRANGE', E.sending, 0, 0, 'WITHSCORES')
    at = math.max(at, tonumber(lease[2]))
  end
  redis.call('ZADD', schedule, at, id)
end

-- A delivery's record, or nil.
function SBW.read(E, delivery_id)
  local raw = redis.call('HGET', E.deliveries, delivery_id)
  return raw and cjson.decode(raw) or nil
end

function SBW.write(E, rec)
  redis.call('HSET', E.deliveries, rec.id, cjson.encode(rec))
end

-- Forgets a delivery: its record, body and places.
function SBW.forget(E, delivery_id)
  redis.call('HDEL', E.deliveries, delivery_id, delivery_id .. ':body')
  redis.call('ZREM', E.due, delivery_id)
  redis.call('ZREM', E.sending, delivery_id)
end

-- A new pending delivery of `body` (type `kind`), due now; the log trimmed to `keep` (the oldest go).
function SBW.add(E, delivery_id, kind, body, keep, now)
  local rec = {id = delivery_id, type = kind, status = 'pending', attempts = 0, base = 0,
    last_status_code = cjson.null, last_error = cjson.null, next_attempt_at = now, created_at = now}
  SBW.write(E, rec)
  redis.call('HSET', E.deliveries, delivery_id .. ':body', body)
  redis.call('ZADD', E.log, now, delivery_id)
  redis.call('ZADD', E.due, now, delivery_id)
  local over = redis.call('ZCARD', E.log) - keep
  if over > 0 then
    -- ZPOPMIN answers id, score, id, score...
    local popped = redis.call('ZPOPMIN', E.log, over)
    for i = 1, #popped, 2 do SBW.forget(E, popped[i]) end
  end
  return rec
end

-- Endpoint `id` in the subscription set of each type of `events` and out of the others (`sets` aligned
-- with `names`).
function SBW.subscribe(sets, names, events, id)
  local wanted = {}
  for _, name in ipairs(events) do wanted[name] = true end
  for i, set in ipairs(sets) do
    if wanted[names[i]] then redis.call('SADD', set, id) else redis.call('SREM', set, id) end
  end
end

-- Takes delivery `delivery_id` (record `rec`) of endpoint `E` for an attempt: counted, and held (due again
-- and in flight) until `now + lease`. Appends to `reply` what a sender needs: endpoint id, url, secret,
-- delivery id, attempt, attempts since a manual retry, type, body.
function SBW.take(E, found, rec, now, lease, reply)
  rec.attempts = rec.attempts + 1
  SBW.write(E, rec)
  redis.call('ZADD', E.due, now + lease, rec.id)
  redis.call('ZADD', E.sending, now + lease, rec.id)
  local body = redis.call('HGET', E.deliveries, rec.id .. ':body') or ''
  for _, v in ipairs({found[1], found[2], found[3], rec.id, sb_int(rec.attempts),
      sb_int(rec.attempts - (rec.base or 0)), rec.type, body}) do
    reply[#reply + 1] = v
  end
end

-- How many more of endpoint `E`'s deliveries may be in flight now (its lapsed leases dropped first).
function SBW.room(E, cap, now)
  redis.call('ZREMRANGEBYSCORE', E.sending, '-inf', now)
  return cap - redis.call('ZCARD', E.sending)
end

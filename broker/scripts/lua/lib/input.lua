-- Library: input taken by the session's message concurrency policy, as posted (post_input.lua) or as a
-- schedule fires (fire_schedule.lua), so both follow the one policy. Needs lib/core.lua, lib/events.lua,
-- lib/partition.lua, lib/calls.lua, lib/run.lua and lib/client.lua.

-- The input taken by the session's policy (S: sb_run_context, its session checked live): with no run
-- active it starts one (message_user, run_queued, step 0 owed); during a run, `steer` keeps the text for
-- the run's next step, `drop` refuses it, and `queue`, `latest`, `merge`, `debounce` queue it as a run of
-- its own (run_queued now; message_user when it starts, see sb_start_next). `I` holds: input_id, text,
-- source, trigger and schedule_id (extensions of message_user, nil for none), scoped (a run-scoped client
-- id, '' for none) and, with one, its registration's fields (clients, client, scoped_name, tools,
-- tool_names, max_clients, max_len, lease_s). Returns {'ok', 'new_run' | 'steered', run id, scoped id} or
-- a refusal; a refusal has written nothing.
local function sb_take_input(S, I)
  local input_id, text, source, scoped = I.input_id, I.text, I.source, I.scoped
  local active = redis.call('HGET', S.run, 'run_id')
  local policy = redis.call('HGET', S.meta, 'policy') or 'steer'

  -- A retry of an input already taken answers as the first attempt did.
  if active == S.run_id then return sb_reply('new_run', active, scoped) end
  if active and redis.call('HEXISTS', S.run, 'in:' .. input_id) == 1 then
    return sb_reply('steered', active, scoped)
  end
  -- (Waiting input is marked in meta, so this is not a walk of the whole queue on every input.)
  if redis.call('HEXISTS', S.meta, SB_QUEUED .. S.run_id) == 1 then return sb_reply('new_run', S.run_id, scoped) end
  if active and policy == 'drop' then
    return sb_refuse('conflict', 'drops_input')
  end
  -- The text is kept twice until its run starts (waiting input, then its message_user event).
  local full = sb_room(S.meta, S.now, 2 * #text + 4 * SB_ENTRY + 256, SB_P.cap)
  if full then return full end

  if scoped ~= '' then
    local lifetime, ttl = sb_rec_never_lifetime_body(), 0
    if I.lease_s ~= '' then
      lifetime, ttl = sb_rec_ttl_lifetime_body(I.lease_s), tonumber(I.lease_s) * 1000
    end
    local name, refusal = sb_register(S, {
      names = S.names, clients = I.clients, client = I.client, cid = scoped,
      name = I.scoped_name, lifetime = lifetime, ttl = ttl, tools = I.tools, tool_names = I.tool_names,
      max_clients = tonumber(I.max_clients), max_len = tonumber(I.max_len),
      run = (active and policy == 'steer') and active or S.run_id,
    })
    if not name then return refusal end
  end

  if active and policy == 'steer' then
    -- `in_bytes` keeps what the run's `in:` fields count, given back when the run ends (sb_end_run).
    redis.call('HSET', S.run, 'in:' .. input_id, '1')
    redis.call('HINCRBY', S.run, 'in_bytes', #input_id + SB_ENTRY)
    if scoped ~= '' then
      redis.call('HSET', S.run, 'scoped', (redis.call('HGET', S.run, 'scoped') or '') .. ' ' .. scoped)
    end
    local entry = cjson.encode({text = text, source = source == 'client' and 'steer' or source,
      trigger = I.trigger, schedule_id = I.schedule_id})
    redis.call('RPUSH', S.inbox, entry)
    sb_add(S.meta, #entry + #input_id + 2 * SB_ENTRY)
    return sb_reply('steered', active, scoped)
  end

  if active or redis.call('LLEN', S.queue) > 0 then
    local entry = cjson.encode({run_id = S.run_id, input_id = input_id, text = text, source = source, at = S.now,
      scoped = scoped, trigger = I.trigger, schedule_id = I.schedule_id})
    redis.call('RPUSH', S.queue, entry)
    redis.call('HSET', S.meta, SB_QUEUED .. S.run_id, '1')
    sb_add(S.meta, #entry + #S.run_id + 2 * SB_ENTRY)
    sb_append(S, sb_ev_run_queued(S.run_id))
    -- Input that waits behind a debounce timer (and no run) restarts the timer: the trailing edge.
    if not active then sb_start_next(S) end
    return sb_reply('new_run', S.run_id, scoped)
  end

  sb_append(S, sb_input_message(text, source, I.trigger, I.schedule_id))
  sb_append(S, sb_ev_run_queued(S.run_id))
  sb_start_run(S, S.run_id, scoped)
  return sb_reply('new_run', S.run_id, scoped)
end

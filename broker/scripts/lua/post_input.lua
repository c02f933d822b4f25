-- Accepts user input by the session's message concurrency policy (held in meta since its creation):
-- with no run active it starts one (message_user, run_queued, step 0 owed); during a run, `steer` keeps
-- the text for the run's next step, `drop` refuses it, and `queue`, `latest`, `merge`, `debounce` queue
-- it as a run of its own (run_queued now; message_user when it starts, see sb_start_next). Input may
-- bring run-scoped client tools: a registration that lives as long as the run it joins.
--
--!layout lib/run.lua   (run_id is the id a new run takes)
--!layout lib/hot.lua   (token '': the route's caller was checked before)
--!key clients      the session's client ids (set)
--!key client       the run-scoped client's hash
--!arg input_id     the input id
--!arg text         its text
--!arg source       'client' | 'external'
--!arg scoped       the run-scoped client id ('' for none)
--!arg scoped_name  its name
--!arg tools        its tools JSON
--!arg tool_names   its tool names joined by "\n"
--!arg max_clients  the most active clients
--!arg max_len      the longest name
--!arg lease_s      its lease in seconds ('' for none: it lives as long as its run)
--
-- Returns {'ok', the answer's body: {"outcome": 'new_run' | 'steered', "run_id", "client_id" (the
-- run-scoped client; left out for none)}, SubmitOutcomeBody's JSON}; refusal not_found; refusal conflict
-- the policy is `drop` and a run is active, the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES),
-- `key_reused`, `key_in_flight`; refusal invalid_request no room for the run-scoped client.
-- The same run id or input id again (a retried request) changes nothing and answers the same, and so does
-- the same Idempotency-Key: its receipt is read and kept here, in the same step (lib/hot.lua).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/client.lua
--!include lib/hot.lua

local S = sb_run_context()
local H = sb_hot_context()
local early = sb_hot_begin(S, H)
if early then return early end

-- The input taken by the session's policy: {'ok', 'new_run' | 'steered', run id, scoped id} or a refusal.
local function sb_take_input()
  local input_id, text, source, scoped = A.input_id, A.text, A.source, A.scoped
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
    if A.lease_s ~= '' then
      lifetime, ttl = sb_rec_ttl_lifetime_body(A.lease_s), tonumber(A.lease_s) * 1000
    end
    local name, refusal = sb_register(S, {
      names = S.names, clients = K.clients, client = K.client, cid = scoped,
      name = A.scoped_name, lifetime = lifetime, ttl = ttl, tools = A.tools, tool_names = A.tool_names,
      max_clients = tonumber(A.max_clients), max_len = tonumber(A.max_len),
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
    local entry = cjson.encode({text = text, source = source == 'client' and 'steer' or source})
    redis.call('RPUSH', S.inbox, entry)
    sb_add(S.meta, #entry + #input_id + 2 * SB_ENTRY)
    return sb_reply('steered', active, scoped)
  end

  if active or redis.call('LLEN', S.queue) > 0 then
    local entry = cjson.encode({run_id = S.run_id, input_id = input_id, text = text, source = source, at = S.now,
      scoped = scoped})
    redis.call('RPUSH', S.queue, entry)
    redis.call('HSET', S.meta, SB_QUEUED .. S.run_id, '1')
    sb_add(S.meta, #entry + #S.run_id + 2 * SB_ENTRY)
    sb_append(S, sb_ev_run_queued(S.run_id))
    -- Input that waits behind a debounce timer (and no run) restarts the timer: the trailing edge.
    if not active then sb_start_next(S) end
    return sb_reply('new_run', S.run_id, scoped)
  end

  sb_append(S, sb_input_message(text, source))
  sb_append(S, sb_ev_run_queued(S.run_id))
  sb_start_run(S, S.run_id, scoped)
  return sb_reply('new_run', S.run_id, scoped)
end

-- Room for the receipt first (the answer is about 150 bytes), so no input is taken without it.
local full = sb_hot_receipt_room(S, H, 256)
if full then return full end
local taken = sb_take_input()
if taken[1] ~= 'ok' then return sb_hot_keep(S, H, taken) end
-- As pydantic writes it (the ids are canonical UUIDs; a null client_id is left out).
return sb_hot_reply(S, H, '{"outcome":"' .. taken[2] .. '","run_id":"' .. taken[3] .. '"'
  .. (taken[4] ~= '' and (',"client_id":"' .. taken[4] .. '"') or '') .. '}')

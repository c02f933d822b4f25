-- Library: registering clients, and the context of the scripts that act on one registration (ping,
-- leave, lapse). Needs lib/core.lua and lib/partition.lua. A script that takes `--!layout lib/client.lua`
-- is handed these first:
--
--!key meta          the session's record (hash)
--!key events        its event log (stream)
--!key names         its registrations by name (hash)
--!key client        the registration (hash)
--!key calls         the session's call records (hash)
--!key owed          the calls still owed an answer (hash)
--!key run           the active run (hash)
--!key client_calls  the registration's call stream
--!arg channel       the session's live channel
--!arg sid           the session id
--!arg cid           the client id
--!arg departed_ms   how long a departed registration's remainder is kept (ms: the idempotency TTL, so a
--                   retried register of the same id still finds it)

-- A ttl registration's lease is its `expires_at` (ms): a ping moves it, and the lease index holds an
-- entry due no later than it, which the timekeeper checks (lapse_client.lua) and moves on if the
-- client pinged meanwhile. So a ping writes one hash field and no index.

local function sb_client_context()
  return {
    meta = K.meta, events = K.events, names = K.names, client = K.client, calls = K.calls, owed = K.owed,
    run = K.run, client_calls = K.client_calls, channel = A.channel, sid = A.sid, cid = A.cid,
    departed_ms = A.departed_ms, now = sb_now_ms(),
  }
end

-- What a registration counts toward its session's storage: its tool list (`bt`, replaced by
-- update_tools.lua), and what leaving releases (`bl`: the tools, lifetime and name entry). What stays
-- counted after it leaves is the few fields a late answer reads and its id in `clients`.
local SB_CLIENT_FIELDS = 192

local function sb_tools_bytes(tools, tool_names)
  return #tools + #tool_names
end

-- Registers client `cid` under the smallest free name (`web`, `web-2`, ...) among the active ones.
-- `R` holds: names, clients, client (keys); cid, name, lifetime (JSON), ttl (ms, 0 for
-- never), tools (JSON), tool_names ("\n" joined), max_clients, max_len, run (the run it is scoped to,
-- or ''). Returns the assigned name and the expiry (-1 for never), or nil and the refusal (too many
-- clients; the session's storage is full).
local function sb_register(S, R)
  local existing = redis.call('HMGET', R.client, 'name', 'expires_at')
  if existing[1] then return existing[1], tonumber(existing[2]) or -1 end
  if redis.call('HLEN', R.names) >= R.max_clients then
    return nil, sb_refuse('invalid_request', 'too_many_clients', R.max_clients)
  end
  local bt = sb_tools_bytes(R.tools, R.tool_names)
  -- The tools are stored twice: the registration and its client_registered event.
  local full = sb_room(S.meta, S.now, bt + #R.tools + 2 * #R.lifetime + 2 * SB_KEY + 4 * SB_ENTRY, SB_P.cap)
  if full then return nil, full end
  local assigned, k = R.name, 2
  while redis.call('HEXISTS', R.names, assigned) == 1 do
    local suffix = '-' .. k
    assigned = string.sub(R.name, 1, R.max_len - #suffix) .. suffix
    k = k + 1
  end
  redis.call('HSET', R.names, assigned, R.cid)
  sb_count('clients_active')
  redis.call('SADD', R.clients, R.cid)
  local bl = bt + #R.lifetime + #assigned + #R.cid + SB_ENTRY
  redis.call('HSET', R.client, 'name', assigned, 'lifetime', R.lifetime, 'ttl_ms', R.ttl, 'tools', R.tools,
    'tool_names', R.tool_names, 'state', 'active', 'created_at', S.now, 'run', R.run, 'bt', bt, 'bl', bl)
  sb_add(S.meta, bl + SB_KEY + SB_CLIENT_FIELDS + #R.cid + SB_ENTRY)
  local expires = -1
  if R.ttl > 0 then
    expires = S.now + R.ttl
    redis.call('HSET', R.client, 'expires_at', expires)
    sb_timer(SB_P.leases, expires, S.sid .. ':' .. R.cid)
  end
  sb_append(S, sb_ev_client_registered(R.cid, assigned, R.lifetime, R.tools))
  return assigned, expires
end

-- Whether the registration at key `client` is active and holds the tool named `tool`. `seen` (kept by the
-- caller for its call) reads each registration once: a step's calls mostly go to one or two.
local function sb_holds(client, tool, seen)
  local names = seen[client]
  if names == nil then
    names = redis.call('HGET', client, 'state') == 'active'
      and '\n' .. (redis.call('HGET', client, 'tool_names') or '') .. '\n'
    seen[client] = names
  end
  return names and string.find(names, '\n' .. tool .. '\n', 1, true) ~= nil
end

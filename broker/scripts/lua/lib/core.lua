-- Library: clock, JSON strings, the event log append, and how every script call runs. Included by
-- scripts with `--!include`.
--
-- Every script builds a context table `S` from the keys and arguments it is handed by name (`K`, `A`:
-- broker/scripts/source.py) and passes it to these functions, so a library never names a key itself. Fields
-- a function reads are listed in its comment.
--!setup sb_core_begin
--!teardown sb_core_end

-- Redis's clock in ms; the µs it also read are kept for `created_at`, which latency figures are measured
-- against. It is read once per call, or once per batch of calls (broker/scripts/batching.py): calls that run as
-- one atomic step may as well run at one instant.
local sb_time_us = 0
local sb_clock_read = false

local function sb_now_ms()
  if not sb_clock_read then
    local t = redis.call('TIME')
    sb_time_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    sb_clock_read = true
  end
  return math.floor(sb_time_us / 1000)
end

-- RFC 3339 UTC with microseconds, from µs since the epoch (days-to-civil, H. Hinnant). The date and time
-- to the second are formatted once per second: every event of a second shares them; the fraction is two
-- groups of three digits, each formatted once (a printf costs more than the rest of the date).
local sb_iso_secs, sb_iso_prefix = -1, ''
local SB_DIGITS3 = {}

local function sb_digits3(n)
  local text = SB_DIGITS3[n]
  if not text then
    text = string.format('%03d', n)
    SB_DIGITS3[n] = text
  end
  return text
end

local function sb_iso(us)
  local secs = math.floor(us / 1000000)
  if secs ~= sb_iso_secs then
    local days = math.floor(secs / 86400)
    local rem = secs - days * 86400
    local hh = math.floor(rem / 3600)
    rem = rem - hh * 3600
    local mi = math.floor(rem / 60)
    local ss = rem - mi * 60
    local z = days + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local y = yoe + era * 400
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    if m <= 2 then y = y + 1 end
    sb_iso_secs = secs
    sb_iso_prefix = string.format('%04d-%02d-%02dT%02d:%02d:%02d.', y, m, d, hh, mi, ss)
  end
  local fraction = us - secs * 1000000
  local ms = math.floor(fraction / 1000)
  return sb_iso_prefix .. sb_digits3(ms) .. sb_digits3(fraction - ms * 1000) .. 'Z'
end

-- Every event of a call is one message on its session's channel, but a call (or a batch of calls,
-- broker/scripts/batching.py) publishes once per channel: its messages joined by newlines (an event's JSON has
-- none), which the live hub splits (broker/services/live.py). The teardown flushes it as each call ends.
local sb_outbox, sb_outbox_order = {}, {}

local function sb_publish(channel, message)
  local queued = sb_outbox[channel]
  if not queued then
    queued = {}
    sb_outbox[channel] = queued
    sb_outbox_order[#sb_outbox_order + 1] = channel
  end
  queued[#queued + 1] = message
end

local function sb_flush_outbox()
  if sb_outbox_order[1] == nil then return end
  for _, channel in ipairs(sb_outbox_order) do
    redis.call('PUBLISH', channel, table.concat(sb_outbox[channel], '\n'))
  end
  sb_outbox, sb_outbox_order = {}, {}
end

-- A Lua string as a JSON string literal.
local function sb_str(s)
  return cjson.encode(s)
end

-- A session's storage (SWITCHBOARD_MAX_SESSION_BYTES). The meta hash's `bytes` counts what the session
-- keeps for good or until a script removes it (events, call records with their call stream entries,
-- registrations, queued input): each script adds the lengths it stores, plus a fixed overhead per entry
-- so a flood of tiny entries counts too, and subtracts what it removes. Receipts expire on their own, so
-- nothing could subtract them: `rc` and `rp` count them by window instead (sb_add_receipt). Read with the
-- session's liveness and seq (one HMGET), added up in Lua and written with the seq, in one HSET, as the
-- call (or batch) ends.
local SB_ENTRY = 64
local SB_KEY = 128
local SB_LIMIT_SETTING = 'SWITCHBOARD_MAX_SESSION_BYTES'
local sb_use = {}

-- Receipts are counted by window, in meta: `rc` the bytes written since `ra` (ms), `rp` those of the
-- window before, `rl` the longest receipt ttl seen. A window is rolled by the first receipt written once
-- it is `rl` old, so what it counts was written before ra + rl and has expired by ra + 2 rl, and the
-- window before by ra + rl: rc + rp (or less, as they age) bounds the receipts still stored.
local SB_USE_FIELDS = {'seq', 'deleted', 'bytes', 'rc', 'rp', 'ra', 'rl'}
local SB_USE_AT = {seq = 1, bytes = 3, rc = 4, rp = 5, ra = 6, rl = 7}

-- The meta fields as read; each is made a number when first used (a tonumber is a strtod) and written
-- back as the call ends only if it changed. What the call adds to `bytes` is summed apart (`added`), so
-- counting an event costs an addition. The table is made with every field it will hold (false: not read
-- yet), so it is sized once.
local function sb_use_read(meta, found)
  local use = {
    found = found, live = found[1] ~= false, added = 0, seq = false, seq_text = false, bytes = false,
    rc = false, rp = false, ra = false, rl = false, rc_set = false, rolled = false,
  }
  sb_use[meta] = use
  return use
end

local function sb_usage(meta)
  return sb_use[meta] or sb_use_read(meta, redis.call('HMGET', meta, unpack(SB_USE_FIELDS)))
end

local function sb_use_get(use, field)
  local value = use[field]
  if value == false then
    value = tonumber(use.found[SB_USE_AT[field]] or 0) or 0
    use[field] = value
  end
  return value
end


-- The receipts still counted at `now`.
local function sb_receipts(use, now)
  local ra, rl = sb_use_get(use, 'ra'), sb_use_get(use, 'rl')
  if now >= ra + 2 * rl then return 0 end
  if now >= ra + rl then return sb_use_get(use, 'rc') end
  return sb_use_get(use, 'rc') + sb_use_get(use, 'rp')
end

-- What the session at `meta` holds now, by this count (bytes).
local function sb_used(meta, now)
  local use = sb_usage(meta)
  return math.max(0, sb_use_get(use, 'bytes') + use.added) + sb_receipts(use, now)
end

local function sb_add(meta, n)
  local use = sb_use[meta] or sb_usage(meta)
  use.added = use.added + n
end

-- What each call record read or written in this call (or batch) counts, by its hash and call id: its
-- stored length, its id and entry, and its call stream entry (`sb`, which is trimmed by time, where
-- nothing could count it out, and goes no later than the record). trim_calls.lua gives it back.
local sb_call_counted = {}

local function sb_call_count(calls, call_id, length, rec)
  local counted = sb_call_counted[calls]
  if not counted then
    counted = {}
    sb_call_counted[calls] = counted
  end
  local size = length + #call_id + SB_ENTRY + (rec.sb or 0)
  local before = counted[call_id] or 0
  counted[call_id] = size
  return size - before
end

-- A call record as stored (`raw`), decoded; what it counts is remembered for sb_put_call.
local function sb_read_call(calls, call_id, raw)
  local rec = cjson.decode(raw)
  sb_call_count(calls, call_id, #raw, rec)
  return rec
end

-- Writes a call record (hash `calls` of the session at `meta`) and counts its change in size. A record
-- not read through sb_read_call in this call is counted as new.
local function sb_put_call(meta, calls, call_id, rec)
  local json = cjson.encode(rec)
  redis.call('HSET', calls, call_id, json)
  sb_add(meta, sb_call_count(calls, call_id, #json, rec))
end

-- Counts a receipt of `n` bytes kept for `ttl` ms.
local function sb_add_receipt(meta, now, ttl, n)
  local use = sb_usage(meta)
  local ra, rl, rc = sb_use_get(use, 'ra'), sb_use_get(use, 'rl'), sb_use_get(use, 'rc')
  if now >= ra + rl then
    use.rp = now < ra + 2 * rl and rc or 0
    use.ra, use.rolled, rc = now, true, 0
  end
  ttl = tonumber(ttl) or 0
  if ttl > rl then use.rl, use.rolled = ttl, true end
  use.rc, use.rc_set = math.max(0, rc + n), true
end

-- nil when the session at `meta` has room for `need` more bytes under `cap` (0: no bound); else the
-- refusal (sb_refuse): `session_full`, naming the session's use, the need and the limit.
local function sb_room(meta, now, need, cap)
  cap = tonumber(cap) or 0
  if cap <= 0 then return nil end
  local used = sb_used(meta, now)
  if used + need <= cap then return nil end
  return {'conflict', 'session_full', used, need, cap}
end

-- What a session that is full says where no one is refused but something is not kept (an event's text:
-- a run that failed, a tool's result): the refusal's values, and the setting.
local function sb_full_text(full)
  return 'this session stores ' .. full[3] .. ' bytes and this would add about ' .. full[4] .. ', past '
    .. SB_LIMIT_SETTING .. ' (' .. full[5] .. ' bytes)'
end

-- Numbers go as text made with %d: a Lua number handed to Redis, or made text by Lua, costs a
-- floating-point printf.
local function sb_int(n)
  return string.format('%d', n)
end

-- The meta field holding when the session's newest event was appended (ms), written with the seq as the
-- call ends: what the session's retention reads back (lib/session.lua sb_last_activity), so the time is
-- kept as a number where it is read, and formatted only into `created_at`.
local SB_EVENT_AT = 'event_at'

local function sb_flush_use()
  if next(sb_use) == nil then return end
  -- Every event of the call (or batch) was appended at the one instant it read (sb_append).
  local at = false
  for meta, use in pairs(sb_use) do
    -- A session gone meanwhile gets no record back. The common cases are written without a table.
    if use.live then
      local bytes = use.added ~= 0 and sb_int(math.max(0, sb_use_get(use, 'bytes') + use.added))
      local rc = use.rc_set and sb_int(use.rc)
      if use.seq_text and not at then at = sb_int(math.floor(sb_time_us / 1000)) end
      if use.rolled then
        redis.call('HSET', meta, 'seq', use.seq_text or sb_int(sb_use_get(use, 'seq')), 'bytes',
          bytes or sb_int(sb_use_get(use, 'bytes')), 'rc', sb_int(sb_use_get(use, 'rc')), 'rp',
          sb_int(sb_use_get(use, 'rp')), 'ra', sb_int(sb_use_get(use, 'ra')), 'rl', sb_int(use.rl))
        if use.seq_text then redis.call('HSET', meta, SB_EVENT_AT, at) end
      elseif use.seq_text and bytes and rc then
        redis.call('HSET', meta, 'seq', use.seq_text, SB_EVENT_AT, at, 'bytes', bytes, 'rc', rc)
      elseif use.seq_text and bytes then
        redis.call('HSET', meta, 'seq', use.seq_text, SB_EVENT_AT, at, 'bytes', bytes)
      elseif use.seq_text or bytes or rc then
        local args = use.seq_text and {'seq', use.seq_text, SB_EVENT_AT, at} or {}
        if bytes then args[#args + 1], args[#args + 2] = 'bytes', bytes end
        if rc then args[#args + 1], args[#args + 2] = 'rc', rc end
        redis.call('HSET', meta, unpack(args))
      end
    end
  end
  sb_use = {}
end

-- A session that does not exist, or is being deleted, answers like one that never existed.
local function sb_session_live(S)
  -- `seq` is written when the session is created, so it tells whether the record exists.
  local found = redis.call('HMGET', S.meta, unpack(SB_USE_FIELDS))
  -- What this call (or batch) has counted already stands: the record read is older.
  if not sb_use[S.meta] then sb_use_read(S.meta, found) end
  return found[1] ~= false and found[2] ~= '1'
end

-- Liveness alone, for a script that stores nothing counted (a ping): two fields, not the storage's seven.
local function sb_session_exists(S)
  local found = redis.call('HMGET', S.meta, 'seq', 'deleted')
  return found[1] ~= false and found[2] ~= '1'
end

-- A session's seq is read with its storage (sb_usage: the HMGET a script makes anyway), counted in Lua and
-- written with it as the call (or batch) ends (sb_flush_use): a step appending 200 events writes it once.
-- Nothing reads it in between: the call is atomic.
local function sb_next_seq(meta)
  local use = sb_usage(meta)
  local seq = sb_use_get(use, 'seq') + 1
  use.seq = seq
  use.seq_text = sb_int(seq)
  return use.seq_text
end

-- Notable events (the catalogue's `notice`; lib/events.lua fills `types`) leave a notice for the workers:
-- `leave(sid, seq)`, which lib/partition.lua sets (it owns the work stream), called by sb_append in the
-- same atomic step as the event, so no crash loses a notice between the event and its consumers
-- (webhooks, the inbox). One table, not two locals: the Functions library's chunk is near Lua's 200.
local SB_NOTICE = {types = {}, leave = false}

-- Appends one event to the session log and publishes it (as the call ends); its JSON and seq. `body` is a
-- JSON object without `seq` and `created_at`; they are spliced in front so the stored text is exactly
-- what every reader sends.
-- Reads S.meta, S.events, S.channel; the time is the one sb_now_ms last read.
local function sb_append(S, body)
  -- Numbers cost Lua and Redis a printf each way, so the seq goes to text once and '1' is text already.
  local seq = sb_next_seq(S.meta)
  local json = '{"seq":' .. seq .. ',"created_at":"' .. sb_iso(sb_time_us) .. '",' .. string.sub(body, 2)
  redis.call('XADD', S.events, seq .. '-0', 'e', json)
  sb_add(S.meta, #json + SB_ENTRY)
  sb_publish(S.channel, json)
  -- Every body starts `{"type":"` (9 bytes): its type is read with one plain find, no pattern.
  if SB_NOTICE.types[string.sub(body, 10, (string.find(body, '"', 10, true) or 10) - 1)] then
    SB_NOTICE.leave(S.sid, seq)
  end
  return json, seq
end

-- A script answers `{outcome, ...}`: 'ok' and its data, or a refusal: its outcome (an error code word:
-- 'not_found', 'conflict', 'invalid_request', 'unauthorized'), the reason (broker/refusals.py writes
-- each reason's message, once) and the values the message names.
local function sb_reply(...)
  return {'ok', ...}
end

local function sb_refuse(outcome, reason, ...)
  return {outcome, reason, ...}
end

-- What this library holds for one call or batch: the clock it read, the storage counted, the messages.
-- The teardown leaves the storage and the messages empty, so only what a failed call left is cleared
-- here (a call that touched nothing makes no table: the hooks run on every call, a ping's included).
local function sb_core_begin()
  sb_clock_read = false
  if next(sb_call_counted) ~= nil then sb_call_counted = {} end
  if next(sb_use) ~= nil then sb_use = {} end
  if sb_outbox_order[1] ~= nil then sb_outbox, sb_outbox_order = {}, {} end
end

local function sb_core_end()
  sb_flush_use()
  sb_flush_outbox()
end

-- entries `from` to `to` of a list, as a list.
local function sb_slice(list, from, to)
  local out = {}
  for i = from, to do out[#out + 1] = list[i] end
  return out
end

-- Runs one script call: its names bound (`bind`), every library's state for the call started (`begin`),
-- the script, then what the libraries held back written (`finish`) even when the script failed part way
-- (what it did is kept, as Redis keeps a failed script's writes, so the seqs it used must be counted);
-- then it answers as the script did.
local function sb_run_script(script, bind, begin, finish)
  begin()
  bind()
  local ok, answer = pcall(script)
  finish()
  if not ok then error(answer, 0) end
  return answer
end

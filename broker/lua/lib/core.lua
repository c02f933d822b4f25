-- Library: clock, JSON strings and the event log append. Included by scripts with `--!include`.
--
-- Every script builds a context table `S` from its KEYS and ARGV and passes it to these functions, so a
-- library never names a key itself. Fields a function reads are listed in its comment.

-- Redis's clock in ms; the µs it also read are kept for `created_at`, which latency figures are measured
-- against. It is read once per call, or once per batch of calls (broker/batching.py): calls that run as
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
-- broker/batching.py) publishes once per channel: its messages joined by newlines (an event's JSON has
-- none), which the live hub splits (broker/live.py). broker/luasource.py flushes it as each call ends.
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
-- nothing could subtract them: `receipts` counts them by window instead (sb_add_receipt). Read with the
-- session's liveness (one HMGET), added up in Lua and written once as the call (or batch) ends.
local SB_ENTRY = 64
local SB_KEY = 128
local SB_LIMIT_SETTING = 'SWITCHBOARD_MAX_SESSION_BYTES'
local sb_use = {}

local function sb_use_read(meta, found)
  local use = {live = found[1] ~= false, bytes = tonumber(found[3] or 0) or 0, receipts = found[4], dirty = false}
  sb_use[meta] = use
  return use
end

local function sb_usage(meta)
  return sb_use[meta] or sb_use_read(meta, redis.call('HMGET', meta, 'seq', 'deleted', 'bytes', 'receipts'))
end

-- `receipts` is `<window start> <newest write> <bytes> <longest ttl> <previous bytes> <its longest ttl>`
-- (ms). A receipt written in the previous window has expired once the current one is as old as the
-- longest ttl of either, so the pair is an upper bound of the receipts still stored.
local function sb_receipt_window(use, now)
  local at, last, cur, ttl, prev, pttl = 0, 0, 0, 0, 0, 0
  if use.receipts then
    local a, l, c, t, p, q = string.match(use.receipts, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
    if a then
      at, last, cur, ttl = tonumber(a), tonumber(l), tonumber(c), tonumber(t)
      prev, pttl = tonumber(p), tonumber(q)
    end
  end
  local longest = math.max(ttl, pttl)
  if now >= last + longest then
    -- Every receipt counted has expired.
    at, cur, ttl, prev, pttl = now, 0, 0, 0, 0
  elseif now >= at + longest then
    at, prev, pttl, cur, ttl = now, cur, ttl, 0, 0
  end
  return at, last, cur, ttl, prev, pttl
end

-- What the session at `meta` holds now, by this count (bytes).
local function sb_used(meta, now)
  local use = sb_usage(meta)
  local _, _, cur, _, prev = sb_receipt_window(use, now)
  return use.bytes + cur + prev
end

local function sb_add(meta, n)
  if n == 0 then return end
  local use = sb_usage(meta)
  use.bytes = use.bytes + n
  if use.bytes < 0 then use.bytes = 0 end
  use.dirty = true
end

-- Writes a call record (hash `calls` of the session at `meta`) and counts its change in size. The record
-- carries what it counts (`b`, first, so trim_calls.lua reads it without decoding), which includes its
-- call stream entry (`sb`: that entry is trimmed by time, where nothing could count it out, and goes no
-- later than the record).
local function sb_put_call(meta, calls, call_id, rec)
  local old = rec.b or 0
  rec.b = nil
  local json = cjson.encode(rec)
  local size = #json + #call_id + SB_ENTRY + (rec.sb or 0)
  rec.b = size
  redis.call('HSET', calls, call_id, '{"b":' .. size .. ',' .. string.sub(json, 2))
  sb_add(meta, size - old)
end

-- Counts a receipt of `n` bytes kept for `ttl` ms.
local function sb_add_receipt(meta, now, ttl, n)
  local use = sb_usage(meta)
  local at, _, cur, longest, prev, pttl = sb_receipt_window(use, now)
  cur = math.max(0, cur + n)
  longest = math.max(longest, tonumber(ttl) or 0)
  use.receipts = at .. ' ' .. now .. ' ' .. cur .. ' ' .. longest .. ' ' .. prev .. ' ' .. pttl
  use.dirty = true
end

-- nil when the session at `meta` has room for `need` more bytes under `cap` (0: no bound); else the
-- refusal's message, naming the setting, the session's use and the limit.
local function sb_room(meta, now, need, cap)
  cap = tonumber(cap) or 0
  if cap <= 0 then return nil end
  local used = sb_used(meta, now)
  if used + need <= cap then return nil end
  return 'this session stores ' .. used .. ' bytes and this would add about ' .. need .. ', past '
    .. SB_LIMIT_SETTING .. ' (' .. cap .. ' bytes): delete the session (or what it no longer needs) or'
    .. ' raise the limit'
end

local function sb_flush_use()
  for meta, use in pairs(sb_use) do
    -- A session gone meanwhile gets no record back.
    if use.dirty and use.live then
      if use.receipts then
        redis.call('HSET', meta, 'bytes', use.bytes, 'receipts', use.receipts)
      else
        redis.call('HSET', meta, 'bytes', use.bytes)
      end
    end
  end
  sb_use = {}
end

-- A session that does not exist, or is being deleted, answers like one that never existed.
local function sb_session_live(S)
  -- `seq` is written when the session is created, so it tells whether the record exists.
  local found = redis.call('HMGET', S.meta, 'seq', 'deleted', 'bytes', 'receipts')
  -- What this call (or batch) has counted already stands: the record read is older.
  if not sb_use[S.meta] then sb_use_read(S.meta, found) end
  return found[1] ~= false and found[2] ~= '1'
end

-- A session's seq is counted in Redis once per call (or batch of calls) and locally after that, and the
-- rest added as the call ends (sb_flush_seqs): a step appending 200 events writes it twice, not 200 times.
-- Nothing reads it in between: the call is atomic.
local sb_seqs = {}

local function sb_next_seq(meta)
  local counted = sb_seqs[meta]
  if counted == nil then
    counted = {last = redis.call('HINCRBY', meta, 'seq', '1'), unwritten = 0}
    sb_seqs[meta] = counted
  else
    counted.last = counted.last + 1
    counted.unwritten = counted.unwritten + 1
  end
  return counted.last
end

local function sb_flush_seqs()
  for meta, counted in pairs(sb_seqs) do
    if counted.unwritten > 0 then redis.call('HINCRBY', meta, 'seq', counted.unwritten) end
  end
  sb_seqs = {}
end

-- Appends one event to the session log and publishes it (as the call ends); its JSON and seq. `body` is a
-- JSON object without `seq` and `created_at`; they are spliced in front so the stored text is exactly
-- what every reader sends.
-- Reads S.meta, S.events, S.channel; the time is the one sb_now_ms last read.
local function sb_append(S, body)
  -- Numbers cost Lua and Redis a printf each way, so the seq goes to text once and '1' is text already.
  local seq = tostring(sb_next_seq(S.meta))
  local json = '{"seq":' .. seq .. ',"created_at":"' .. sb_iso(sb_time_us) .. '",' .. string.sub(body, 2)
  redis.call('XADD', S.events, seq .. '-0', 'e', json)
  sb_add(S.meta, #json + SB_ENTRY)
  sb_publish(S.channel, json)
  return json, seq
end

local function sb_message_user(text, source)
  return '{"type":"message_user","message":{"role":"user","content":[{"type":"text","data":{"text":'
    .. sb_str(text) .. '}}]},"source":"' .. source .. '"}'
end

local function sb_custom(kind, payload)
  return '{"type":"custom","kind":"' .. kind .. '","payload":' .. payload .. '}'
end

local function sb_run_event(kind, run_id)
  return '{"type":"' .. kind .. '","run_id":' .. sb_str(run_id) .. '}'
end

local function sb_tool_result(call_id, text, is_error)
  return '{"type":"tool_result","call_id":' .. sb_str(call_id)
    .. ',"content":[{"type":"text","data":{"text":' .. sb_str(text) .. '}}],"is_error":'
    .. (is_error and 'true' or 'false') .. '}'
end

local function sb_reply(...)
  return {0, ...}
end

local function sb_refuse(status, message)
  return {status, message}
end

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

-- A session that does not exist, or is being deleted, answers like one that never existed.
local function sb_session_live(S)
  -- `seq` is written when the session is created, so it tells whether the record exists.
  local found = redis.call('HMGET', S.meta, 'seq', 'deleted')
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

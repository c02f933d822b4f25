-- Library: the context of the scripts that act on one call (ack, answer, deadline). Needs lib/core.lua.
-- Every script that includes it takes this KEYS and ARGV layout, then its own ARGV from 5 on:
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] calls  KEYS[4] owed  KEYS[5] run  KEYS[6] the call's deadline key
-- KEYS[7] deadlines (global)  KEYS[8] continuations (global)
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] call id  ARGV[4] client id ('' when acting for none)

local function sb_call_context()
  return {
    meta = KEYS[1], events = KEYS[2], calls = KEYS[3], owed = KEYS[4], run = KEYS[5], deadline = KEYS[6],
    deadlines = KEYS[7], continuations = KEYS[8], channel = ARGV[1], sid = ARGV[2], call_id = ARGV[3],
    cid = ARGV[4], now = sb_now_ms(),
  }
end

-- The call as the client at S.cid may see it: nil when it does not exist or belongs to another
-- registration, which both answer 404 so no client learns of another's calls.
local function sb_own_call(S)
  local raw = redis.call('HGET', S.calls, S.call_id)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec.client ~= S.cid then return nil end
  return rec
end

-- The 409 for an ack or answer of a call that is already settled.
local function sb_settled_refusal(S, rec)
  if rec.state == 'failed' then
    return sb_refuse(409, 'call ' .. S.call_id .. ' failed: ' .. rec.reason)
  end
  return sb_refuse(409, 'call ' .. S.call_id .. ' already has a result')
end

-- Moves a dispatched call to acked: the ack deadline is swapped for the result deadline.
local function sb_ack(S, rec, result_ms)
  local due = S.now + result_ms
  redis.call('SET', S.deadline, 'result', 'PX', result_ms)
  redis.call('ZADD', S.deadlines, due, S.sid .. ':' .. S.call_id)
  rec.state = 'acked'
  rec.ack = sb_append(S, '{"type":"client_tool_acked","client_id":' .. sb_str(S.cid) .. ',"call_id":'
    .. sb_str(S.call_id) .. '}')
  redis.call('HSET', S.calls, S.call_id, cjson.encode(rec))
  return rec.ack
end

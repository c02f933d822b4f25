-- Commits a model step atomically: the assistant message, then per tool call its `tool_call` event and
-- either its dispatch (call record, the registration's call stream, `client_tool_dispatched`, the ack
-- deadline key and index entry) or an error result when no active registration holds the tool. Then the
-- run completes, waits on its clients, or (nothing to wait for) schedules its next step.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.  KEYS[10..]: per call resolved to a client, in order,
-- its client hash, its client call stream and its deadline key.
-- ARGV[4] step  ARGV[5] ack deadline ms  ARGV[6] message_assistant JSON  ARGV[7] number of calls
-- ARGV[8] text for run_gone  ARGV[9] call stream retention ms
-- then 7 per call: call id, client name ('' for a tool no client could hold), client id resolved by the
-- caller ('' for none), raw tool name, tool_call JSON, client_tool_dispatched JSON (without seq), error
-- tool_result JSON (used when the registration does not hold the tool).
-- Returns {0, 'completed' | 'waiting' | 'continue' | 'cancelled' | 'stale' | 'retry', member or ''};
-- {404, msg} no session. 'retry': a name now resolves differently than the caller saw; resolve again.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local step, ack_ms, ncalls = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7])
local retention = tonumber(ARGV[9])
local current = sb_current_step(S, step)
if not current or current.state ~= 'running' then return sb_reply('stale', '') end
if current.cancel then
  sb_end_run(S, 'run_cancelled', nil, ARGV[8])
  return sb_reply('cancelled', '')
end

-- Every name must still resolve as the caller saw it before anything is written.
for i = 0, ncalls - 1 do
  local base = 10 + i * 7
  local client_name, cid = ARGV[base + 1], ARGV[base + 2]
  if client_name ~= '' and (redis.call('HGET', S.names, client_name) or '') ~= cid then
    return sb_reply('retry', '')
  end
end

sb_append(S, ARGV[6])
local pending, k = 0, 10
for i = 0, ncalls - 1 do
  local base = 10 + i * 7
  local call_id, cid, tool = ARGV[base], ARGV[base + 2], ARGV[base + 3]
  sb_append(S, ARGV[base + 4])
  local holds = false
  if cid ~= '' then
    local client, stream, deadline = KEYS[k], KEYS[k + 1], KEYS[k + 2]
    k = k + 3
    local names = '\n' .. (redis.call('HGET', client, 'tool_names') or '') .. '\n'
    holds = string.find(names, '\n' .. tool .. '\n', 1, true) ~= nil
    if holds then
      local rec = {client = cid, run = S.run_id, step = step, tool = tool, state = 'dispatched'}
      redis.call('HSET', S.calls, call_id, cjson.encode(rec))
      redis.call('HSET', S.owed, call_id, cid)
      local event = sb_append(S, ARGV[base + 5])
      redis.call('XADD', stream, 'MINID', '~', S.now - retention, '*', 'call', call_id, 'e', event)
      redis.call('SET', deadline, 'ack', 'PX', ack_ms)
      redis.call('ZADD', S.deadlines, S.now + ack_ms, S.sid .. ':' .. call_id)
      pending = pending + 1
    end
  end
  if not holds then sb_append(S, ARGV[base + 6]) end
end

if ncalls == 0 then
  -- Input that steered the run while this step ran has not been answered yet: one more step.
  if redis.call('LLEN', S.inbox) > 0 then return sb_reply('continue', sb_schedule_step(S, S.run_id, step + 1)) end
  sb_end_run(S, 'run_completed', nil, ARGV[8])
  return sb_reply('completed', '')
end
if pending == 0 then return sb_reply('continue', sb_schedule_step(S, S.run_id, step + 1)) end
redis.call('HSET', S.run, 'state', 'waiting', 'pending', pending)
return sb_reply('waiting', '')

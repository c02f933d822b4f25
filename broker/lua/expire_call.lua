-- Fails a call whose deadline has passed: ack_timeout before an ack, result_timeout after one. The
-- deadline index is the authority: a call acked in the meantime, or already settled, is left alone.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] is '').
-- ARGV[5] text for ack_timeout  ARGV[6] text for result_timeout
-- Returns {0, 'failed' | 'not_due' | 'settled', continuation member or ''}.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/call.lua

local S = sb_call_context()
local member = S.sid .. ':' .. S.call_id
local due = redis.call('ZSCORE', S.deadlines, member)
if not due then return sb_reply('settled', '') end
if tonumber(due) > S.now then return sb_reply('not_due', '') end
local raw = redis.call('HGET', S.calls, S.call_id)
local rec = raw and cjson.decode(raw)
if not rec or (rec.state ~= 'dispatched' and rec.state ~= 'acked') or not sb_session_live(S) then
  redis.call('ZREM', S.deadlines, member)
  return sb_reply('settled', '')
end
redis.call('DEL', S.deadline)
if rec.state == 'dispatched' then
  return sb_reply('failed', sb_fail_call(S, S.call_id, rec, 'ack_timeout', ARGV[5]) or '')
end
return sb_reply('failed', sb_fail_call(S, S.call_id, rec, 'result_timeout', ARGV[6]) or '')

-- A worker takes a queued server call: it runs until its lease (renewed while it runs) lapses, after
-- which the call fails as interrupted.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] is '').  ARGV[5] lease ms
-- Returns {0, 'run', tool, arguments JSON} or {0, 'stale'} (settled, or another worker holds it).

--!include lib/core.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'queued' or not sb_session_live(S) then
  redis.call('ZREM', S.work, 't|' .. S.sid .. '|' .. S.call_id)
  return sb_reply('stale')
end
rec.state = 'running'
redis.call('HSET', S.calls, S.call_id, cjson.encode(rec))
redis.call('ZREM', S.work, 't|' .. S.sid .. '|' .. S.call_id)
sb_set_deadline(S, 'lease', tonumber(ARGV[5]))
return sb_reply('run', rec.tool, rec.args)

-- Lapses a ttl registration whose lease entry came due (the timekeeper). Idempotent: a client that pinged
-- in the meantime gets its entry moved to its new expiry, and a client already gone changes nothing.
--
--!layout lib/client.lua
--!arg result_ms  the deployment's result deadline (ms): how long a waiting call without a timeout_s of
--                its own waits, from its first dispatch (lib/calls.lua sb_park)
-- Returns {'ok', 'lapsed' | 'alive' | 'gone'}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/client.lua

local S = sb_client_context()
S.result_ms = tonumber(A.result_ms)
local state = redis.call('HGET', S.client, 'state')
if state ~= 'active' or not sb_session_live(S) then
  redis.call('ZREM', SB_P.leases, S.sid .. ':' .. S.cid)
  return sb_reply('gone')
end
local expires = tonumber(redis.call('HGET', S.client, 'expires_at') or '0')
if expires > S.now then
  sb_timer(SB_P.leases, expires, S.sid .. ':' .. S.cid)
  return sb_reply('alive')
end
sb_client_gone(S, S.cid, 'timed_out')
return sb_reply('lapsed')

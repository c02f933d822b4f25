-- Lapses a ttl registration whose lease key has expired (expiry notification or the sweeper).
-- Idempotent: a lease renewed in the meantime, or a client already gone, changes nothing.
--
-- KEYS and ARGV: the layout of lib/client.lua.
-- Returns {0, 'lapsed' | 'alive' | 'gone', owed}.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/client.lua

local S = sb_client_context()
local state = redis.call('HGET', S.client, 'state')
if state ~= 'active' or not sb_session_live(S) then
  redis.call('ZREM', S.leases, S.sid .. ':' .. S.cid)
  return sb_reply('gone', S.owe)
end
if redis.call('EXISTS', S.lease) == 1 then return sb_reply('alive', S.owe) end
sb_client_gone(S, S.cid, 'timed_out')
return sb_reply('lapsed', S.owe)

-- Keeps a ttl registration alive until now + ttl. A registration whose lease has already expired is
-- lapsed here and now (`client_left` timed_out, owed calls failed), so it is never half alive.
--
-- KEYS and ARGV: the layout of lib/client.lua.
-- Returns {0, expires ms or -1 for never, owed}; {404, 'session'}; {404, 'client', owed} when the
-- registration is gone (including a lapse found by this ping, whose owed work comes with it).

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/client.lua

local S = sb_client_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local client = redis.call('HMGET', S.client, 'state', 'ttl_ms')
if client[1] ~= 'active' then return {404, 'client', S.owe} end
local ttl = tonumber(client[2])
if ttl == 0 then return sb_reply(-1, S.owe) end
if redis.call('EXISTS', S.lease) == 0 then
  sb_client_gone(S, S.cid, 'timed_out')
  return {404, 'client', S.owe}
end
local expires = S.now + ttl
redis.call('SET', S.lease, '1', 'PX', ttl)
redis.call('ZADD', S.leases, expires, S.sid .. ':' .. S.cid)
redis.call('HSET', S.client, 'expires_at', expires)
return sb_reply(expires, S.owe)

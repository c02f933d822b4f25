-- Keeps a ttl registration alive until now + ttl. A registration whose lease has already expired is
-- lapsed here and now (`client_left` timed_out, owed calls failed), so it is never half alive. Answers as
-- HTTP (lib/http.lua). The lease index is not touched: its entry, due at the old expiry, is moved on by
-- the timekeeper when it comes due (lapse_client.lua), so a ping costs one field.
--
-- KEYS and ARGV: the layout of lib/client.lua.
-- KEYS[8] the session's tokens  KEYS[9] the Idempotency-Key receipt
-- ARGV[4] token SHA-256 ('' for an API key)  ARGV[5] request fingerprint ('' for none)  ARGV[6] receipt ttl ms
-- Returns {HTTP status, body}: 200 and {"expires_at"} (null for never); 404 when the registration is gone
-- (including a lapse found by this ping); 401 (token).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/client.lua
--!include lib/http.lua

local S = sb_client_context()
local H = {tokens = KEYS[8], receipt = KEYS[9], token = ARGV[4], fp = ARGV[5], ttl = ARGV[6]}
local early = sb_http_begin(S, H)
if early then return early end
-- Built only for a refusal: a ping that succeeds makes no string it does not send.
local function gone()
  return 'no active client ' .. S.cid .. ' in this session (it left, lapsed, or never registered); register again'
end
local client = redis.call('HMGET', S.client, 'state', 'ttl_ms', 'expires_at')
if client[1] ~= 'active' then return sb_http_refuse(S, H, 404, gone()) end
local ttl = tonumber(client[2])
if ttl == 0 then return sb_http_reply(S, H, 200, '{"expires_at":null}') end
if tonumber(client[3]) <= S.now then
  sb_client_gone(S, S.cid, 'timed_out')
  return sb_http_refuse(S, H, 404, gone())
end
local expires = S.now + ttl
redis.call('HSET', S.client, 'expires_at', expires)
return sb_http_reply(S, H, 200, '{"expires_at":"' .. sb_iso(expires * 1000) .. '"}')

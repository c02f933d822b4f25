-- Acknowledges a dispatched call: `client_tool_acked`, and the result deadline replaces the ack deadline.
-- A repeated ack of an acked call answers with the same event. Answers as HTTP (lib/http.lua).
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua.
-- KEYS[9] the session's tokens  KEYS[10] the Idempotency-Key receipt
-- ARGV[5] result deadline ms  ARGV[6] token SHA-256 ('' when the caller checked an API key)
-- ARGV[7] request fingerprint ('' for no Idempotency-Key)  ARGV[8] receipt ttl ms
-- Returns {HTTP status, body, owed}: 200 and the acked event; 404 (no such call for this client, or no
-- session); 409 (settled, or not dispatched yet); 401 (token).

--!include lib/core.lua
--!include lib/call.lua
--!include lib/http.lua

local S = sb_call_context()
local H = {tokens = KEYS[9], receipt = KEYS[10], token = ARGV[6], fp = ARGV[7], ttl = tonumber(ARGV[8])}
local early = sb_http_begin(S, H)
if early then return early end
local rec = sb_own_call(S)
if not rec then return sb_http_refuse(S, H, 404, 'client ' .. S.cid .. ' has no call ' .. S.call_id) end
if rec.state == 'acked' then return sb_http_reply(S, H, 200, rec.ack) end
if rec.state ~= 'dispatched' then
  local refusal = sb_settled_refusal(S, rec)
  return sb_http_refuse(S, H, refusal[1], refusal[2])
end
return sb_http_reply(S, H, 200, sb_ack(S, rec, tonumber(ARGV[5])))

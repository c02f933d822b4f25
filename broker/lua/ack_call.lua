-- Acknowledges a dispatched call: `client_tool_acked`, and the result deadline replaces the ack deadline.
-- A repeated ack of an acked call answers with the same event. Answers as HTTP (lib/http.lua).
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua.
-- KEYS[6] the session's tokens  KEYS[7] the Idempotency-Key receipt  KEYS[8] the registration's call
-- stream
-- ARGV[5] result deadline ms  ARGV[6] token SHA-256 ('' when the caller checked an API key)
-- ARGV[7] request fingerprint ('' for no Idempotency-Key)  ARGV[8] receipt ttl ms
-- ARGV[9] the pool member acking ('' for a caller outside any pool)  ARGV[10] the pool's group
-- Returns {HTTP status, body}: 200 and the acked event; 404 (no such call for this client, or no
-- session); 409 (settled, not dispatched yet, held by another pool member, or the session's storage is
-- full: SWITCHBOARD_MAX_SESSION_BYTES); 401 (token).
--
-- Pools: the member holding the call (pool_take.lua) is the only member whose ack counts, and its ack
-- settles the call's entry in the group, so the call is never handed to another member.

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/call.lua
--!include lib/http.lua

local S = sb_call_context()
local H = {tokens = KEYS[6], receipt = KEYS[7], token = ARGV[6], fp = ARGV[7], ttl = ARGV[8], cap = SB_P.cap}
local rec, refused = sb_http_own_call(S, H)
if not rec then return refused end
local member = ARGV[9]
if member ~= '' and rec.member and rec.member ~= member then
  return sb_http_refuse(S, H, 409, 'call ' .. S.call_id .. ' was handed to another pool member')
end
if rec.state ~= 'dispatched' and rec.state ~= 'acked' then
  local refusal = sb_settled_refusal(S, rec)
  return sb_http_refuse(S, H, refusal[1], refusal[2])
end
-- The acked event, and the record's growth.
local full = sb_http_room(S, H, rec.state == 'acked' and 256 or 2 * SB_ENTRY + 256)
if full then return full end
if rec.state == 'acked' then return sb_http_reply(S, H, 200, sb_ack_event(S, rec)) end
if member ~= '' then rec.member = member end
return sb_http_reply(S, H, 200, sb_ack(S, rec, sb_result_window(rec, tonumber(ARGV[5])), {KEYS[8], ARGV[10]}))

-- Records a client's result as the call's `tool_result`; a result without an ack acks first. When it
-- settles the last call of the step, the next step is owed (an entry on the partition's work stream).
-- Answers as HTTP (lib/http.lua).
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua.
-- KEYS[6] the session's tokens  KEYS[7] the Idempotency-Key receipt  KEYS[8] the registration's call
-- stream
-- ARGV[5] tool_result event JSON  ARGV[6] result deadline ms  ARGV[7] token SHA-256 ('' for an API key)
-- ARGV[8] request fingerprint ('' for no Idempotency-Key)  ARGV[9] receipt ttl ms  ARGV[10] the pool group
-- Returns {HTTP status, body}: 204 and ''; 404; 409 (already settled, or the session's storage is full:
-- SWITCHBOARD_MAX_SESSION_BYTES, and the call stays owed); 401 (token).

--!layout lib/call.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/http.lua

local S = sb_call_context()
local H = {tokens = KEYS[6], receipt = KEYS[7], token = ARGV[7], fp = ARGV[8], ttl = ARGV[9], cap = SB_P.cap}
local rec, refused = sb_http_own_call(S, H)
if not rec then return refused end
if rec.state ~= 'dispatched' and rec.state ~= 'acked' then
  local refusal = sb_settled_refusal(S, rec)
  return sb_http_refuse(S, H, refusal[1], refusal[2])
end
-- The result's event, an ack's when it acks too, and the record's growth.
local full = sb_http_room(S, H, #ARGV[5] + 3 * SB_ENTRY + 256)
if full then return full end
if rec.state == 'dispatched' then sb_ack(S, rec, sb_result_window(rec, tonumber(ARGV[6])), {KEYS[8], ARGV[10]}) end
sb_append(S, ARGV[5])
sb_count('calls_answered')
sb_observe_ms('ack_to_result', S.now - (rec.acked_ms or S.now))
sb_settle(S, S.call_id, rec, 'answered', nil)
return sb_http_reply(S, H, 204, '')

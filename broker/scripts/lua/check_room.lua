-- Whether a session has room for a large write before it is sent (a client's result of more than 256 KiB,
-- broker/services/clients.py): a flood of them at SWITCHBOARD_MAX_SESSION_BYTES is refused without Redis taking
-- each body in. The write's own script checks again, exactly. Answers as a hot route (lib/hot.lua), after the
-- token and the session, so nobody learns more of a session than its own script would tell them.
--
--!key meta      the session's meta
--!key tokens    the session's tokens
--!arg sid       the session id
--!arg token     the token's SHA-256 ('' when the caller checked an API key)
--!arg need      the bytes the write would add
--!arg cap       SWITCHBOARD_MAX_SESSION_BYTES
-- Returns {'ok'} (room); refusals: conflict (no room: the refusal to answer), not_found, unauthorized.

--!include lib/core.lua
--!include lib/hot.lua

local S = {meta = K.meta, sid = A.sid, now = sb_now_ms()}
local H = {tokens = K.tokens, receipt = '', token = A.token, fp = '', ttl = 0, cap = A.cap}
local early = sb_hot_begin(S, H)
if early then return early end
local full = sb_hot_room(S, H, tonumber(A.need))
if full then return full end
return sb_reply()

-- Whether a session has room for a large write before it is sent (a client's result of more than 256 KiB,
-- broker/clients.py): a flood of them at SWITCHBOARD_MAX_SESSION_BYTES is refused without Redis taking
-- each body in. The write's own script checks again, exactly. Answers as HTTP (lib/http.lua), after the
-- token and the session, so nobody learns more of a session than its own script would tell them.
--
-- KEYS[1] the session's meta  KEYS[2] the session's tokens
-- ARGV[1] session id  ARGV[2] token SHA-256 ('' when the caller checked an API key)
-- ARGV[3] the bytes the write would add  ARGV[4] SWITCHBOARD_MAX_SESSION_BYTES
-- Returns {HTTP status, body}: 200 and '' (room); 409 (no room: the refusal to answer); 404; 401.

--!include lib/core.lua
--!include lib/http.lua

local S = {meta = KEYS[1], sid = ARGV[1], now = sb_now_ms()}
local H = {tokens = KEYS[2], receipt = '', token = ARGV[2], fp = '', ttl = 0, cap = ARGV[4]}
local early = sb_http_begin(S, H)
if early then return early end
local full = sb_http_room(S, H, tonumber(ARGV[3]))
if full then return full end
return {200, ''}

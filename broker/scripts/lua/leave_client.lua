-- A client leaves: `client_left` departed, its name released, its owed calls failed with client_gone
-- (those of a tool declared on_leave 'wait' wait for the next registration of its name instead).
-- Leaving a registration that has already ended changes nothing and succeeds. Run-scoped registrations
-- leave this way when their run ends.
--
--!layout lib/client.lua
--!arg result_ms  the deployment's result deadline (ms): how long a waiting call without a timeout_s of
--                its own waits, from its first dispatch
-- Returns {'ok'}; refusal not_found when the session or the client does not exist.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/client.lua

local S = sb_client_context()
S.result_ms = tonumber(A.result_ms)
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local state = redis.call('HGET', S.client, 'state')
if not state then return sb_refuse('not_found', 'no_client', S.cid) end
if state == 'active' then sb_client_gone(S, S.cid, 'departed') end
return sb_reply()

-- Records a client's result as the call's `tool_result`; a result without an ack acks first. When it
-- settles the last call of the step, the next step is owed.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua.
-- ARGV[5] tool_result event JSON  ARGV[6] answer tag (idempotency identity, '' for none)
-- ARGV[7] result deadline ms
-- Returns {0, owed}; {404, 'session' | 'call'}; {409, msg} already settled (unless the same tag answered
-- it, which is a retry and answers {0, {}}).

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local rec = sb_own_call(S)
if not rec then return sb_refuse(404, 'call') end
local tag = ARGV[6]
if rec.state == 'answered' and tag ~= '' and rec.tag == tag then return sb_reply(S.owe) end
if rec.state ~= 'dispatched' and rec.state ~= 'acked' then return sb_settled_refusal(S, rec) end
if rec.state == 'dispatched' then sb_ack(S, rec, tonumber(ARGV[7])) end
sb_append(S, ARGV[5])
redis.call('DEL', S.deadline)
rec.tag = tag
sb_settle(S, S.call_id, rec, 'answered', nil)
return sb_reply(S.owe)

-- Records a pending MCP sign-in under its state's digest, until its wait runs out and a day more (the
-- tombstone that tells a late or replayed link from a stranger's).
--
--!key authorization  the pending sign-in's hash
--!arg fields         its fields (JSON object of strings)
--!arg wait_ms        how long the sign-in may take
--!arg keep_ms        how long the key lives past that
--
-- Returns {'ok', expires_at ms}, or a refusal: mcp_authorization_taken (a state drawn twice).

--!include lib/core.lua

if redis.call('EXISTS', K.authorization) == 1 then return sb_refuse('conflict', 'mcp_authorization_taken') end
local expires_at = sb_now_ms() + tonumber(A.wait_ms)
local args = {'expires_at', expires_at}
for name, value in pairs(cjson.decode(A.fields)) do
  args[#args + 1] = name
  args[#args + 1] = value
end
redis.call('HSET', K.authorization, unpack(args))
redis.call('PEXPIRE', K.authorization, tonumber(A.wait_ms) + tonumber(A.keep_ms))
return sb_reply(expires_at)

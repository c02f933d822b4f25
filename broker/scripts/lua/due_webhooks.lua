-- The endpoints with a delivery to send now (the schedule read against Redis's clock), earliest first.
--
--!key schedule    the workspace's schedule of endpoints (webhooks-due)
--!arg most        the most endpoints to answer
--
-- Returns {'ok', Redis's time in ms, endpoint id...}.

--!include lib/core.lua

local now = sb_now_ms()
local reply = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'LIMIT', 0, tonumber(A.most))
table.insert(reply, 1, sb_int(now))
table.insert(reply, 1, 'ok')
return reply

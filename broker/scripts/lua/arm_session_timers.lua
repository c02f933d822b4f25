-- Gives a session created before its timers existed the retention timer (`r|<session id>`) and the trim
-- timer (`c|<session id>`) a new session gets at creation (create_session.lua), each only if missing:
-- run once over the workspace's sessions after an upgrade (broker/services/retention.py).
--
--!key meta          the session's record
--!arg sid           session id
--!arg retention_ms  session retention ms
--!arg settled_ms    settled-call retention ms (0: no timer)
--
-- Returns {'ok', 'armed' | 'gone'}.

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = K.meta, now = sb_now_ms()}
if not sb_session_live(S) then return sb_reply('gone') end
for _, timer in ipairs({{'r|', A.retention_ms}, {'c|', A.settled_ms}}) do
  local after, member = tonumber(timer[2]), timer[1] .. A.sid
  if after > 0 and not redis.call('ZSCORE', SB_P.purges, member) then
    sb_timer(SB_P.purges, S.now + after, member)
  end
end
return sb_reply('armed')

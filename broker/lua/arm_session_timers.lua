-- Gives a session created before its timers existed the retention timer (`r|<session id>`) and the trim
-- timer (`c|<session id>`) a new session gets at creation (create_session.lua), each only if missing:
-- run once over the workspace's sessions after an upgrade (broker/retention.py).
--
-- KEYS[1] meta
-- ARGV[1] session id  ARGV[2] session retention ms  ARGV[3] settled-call retention ms (0: no timer)
-- Returns {0, 'armed' | 'gone'}.

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = KEYS[1], now = sb_now_ms()}
if not sb_session_live(S) then return sb_reply('gone') end
for i, prefix in ipairs({'r|', 'c|'}) do
  local after, member = tonumber(ARGV[i + 1]), prefix .. ARGV[1]
  if after > 0 and not redis.call('ZSCORE', SB_P.purges, member) then
    sb_timer(SB_P.purges, S.now + after, member)
  end
end
return sb_reply('armed')

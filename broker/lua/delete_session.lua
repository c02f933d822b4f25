-- Deletes a session. Its active run ends first (owed calls fail with run_gone, then run_cancelled), and
-- so does every queued run, so live streams see each run end; then `deleted` goes out on the channel,
-- the session leaves its partition's indexes, and the log and state go. The record and tokens stay as a
-- tombstone for ARGV[4] ms, so the session's own tokens get 404 (not 401) from then on. Per-client keys
-- are purged later by the timekeeper (purge index), and the workspace's session indexes are left by the
-- caller (another slot).
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua (ARGV[3] is '').  KEYS[9] tokens
-- ARGV[4] tombstone ms  ARGV[5] text for run_gone
-- Returns {0}; {404, 'session'}.

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
-- Nothing may start once the session is going: the queue is taken before the active run ends.
local queued = redis.call('LRANGE', S.queue, 0, -1)
redis.call('DEL', S.queue)
if redis.call('EXISTS', S.run) == 1 then sb_end_run(S, 'run_cancelled', nil, ARGV[5]) end
for _, raw in ipairs(queued) do
  sb_append(S, sb_run_event('run_cancelled', cjson.decode(raw).run_id))
  sb_count('runs_ended:run_cancelled')
end
local names = redis.call('HGETALL', S.names)
if #names > 0 then sb_count('clients_active', -(#names / 2)) end
for i = 2, #names, 2 do redis.call('ZREM', SB_P.leases, S.sid .. ':' .. names[i]) end
redis.call('ZREM', SB_P.dequeue, S.sid)
sb_publish(S.channel, 'deleted')
redis.call('HSET', S.meta, 'deleted', '1')
sb_timer(SB_P.purges, S.now, S.sid)
redis.call('UNLINK', S.events, S.names, S.calls, S.owed, S.run, S.inbox)
redis.call('PEXPIRE', S.meta, ARGV[4])
redis.call('PEXPIRE', KEYS[9], ARGV[4])
return sb_reply()

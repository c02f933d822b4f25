-- Deletes a session. Its active run ends first (owed calls fail with run_gone, then run_cancelled) so live
-- streams see the end; then `deleted` goes out on the channel, the session leaves every index, and the
-- log and state go. The record and tokens stay as a tombstone for ARGV[4] ms, so the session's own
-- tokens get 404 (not 401) from then on. Per-client keys are purged later by a worker's sweeper.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua (ARGV[3] is '').
-- KEYS[10] tokens  KEYS[11] sessions index  KEYS[12] the agent's session set  KEYS[13] leases (global)
-- KEYS[14] purge index (global): the per-client keys left for the sweeper to drop
-- ARGV[4] tombstone ms  ARGV[5] text for run_gone
-- Returns {0}; {404, msg} no session.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
if redis.call('EXISTS', S.run) == 1 then sb_end_run(S, 'run_cancelled', nil, ARGV[5]) end
local names = redis.call('HGETALL', S.names)
for i = 2, #names, 2 do redis.call('ZREM', KEYS[13], S.sid .. ':' .. names[i]) end
redis.call('PUBLISH', S.channel, 'deleted')
redis.call('HSET', S.meta, 'deleted', '1')
redis.call('ZREM', KEYS[11], S.sid)
redis.call('SREM', KEYS[12], S.sid)
redis.call('ZADD', KEYS[14], S.now, S.sid)
redis.call('UNLINK', S.events, S.names, S.calls, S.owed, S.run, S.inbox)
redis.call('PEXPIRE', S.meta, ARGV[4])
redis.call('PEXPIRE', KEYS[10], ARGV[4])
return sb_reply()

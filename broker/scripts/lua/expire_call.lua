-- Fails a call whose deadline has passed: an approval whose deadline came resolves as a deny (reason
-- `timeout`); a client call with ack_timeout before an ack and result_timeout after one, and with
-- client_gone while it waits for its client (no registration took it in time); a server call whose worker
-- stopped renewing its lease with an error result saying it was
-- interrupted. The deadline index is the authority: a call acked or renewed in the meantime, or already
-- settled, is left alone.
--
--!layout lib/call.lua   (cid is '')
--!arg ack_text        text for ack_timeout
--!arg result_text     text for result_timeout
--!arg interrupted     text for an interrupted server call
--!arg result_ms       the deployment's result deadline ms (a tool's own timeout_s or heartbeat_s says its
--                      own text)
--
-- Returns {'ok', 'failed' | 'denied' | 'not_due' | 'settled' | 'queued'}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua

-- How many times a grant's call whose worker stopped is taken up again before it fails as interrupted.
local SB_GRANT_LAPSES = 3

local S = sb_call_context()
local member = S.sid .. ':' .. S.call_id
local due = redis.call('ZSCORE', SB_P.deadlines, member)
if not due then return sb_reply('settled') end
if tonumber(due) > S.now then return sb_reply('not_due') end
local rec = sb_call(S)
if rec and rec.state == 'awaiting' and rec.expires and sb_session_live(S) then
  -- The approval's deadline (its policy's approval_timeout_s) came with no decision: a deny, which the
  -- model reads as an error result, and the run goes on.
  local text = 'no decision within ' .. sb_int(rec.ato / 1000) .. ' s (the policy\'s approval_timeout_s)'
  sb_append(S, sb_ev_approval_resolved(S.call_id, 'deny', text, nil, nil, nil, nil, 'timeout'))
  rec.decision = 'deny'
  sb_append(S, sb_error_result(S.call_id, 'the call was denied: ' .. text))
  sb_settle(S, S.call_id, rec, 'denied', 'denied')
  return sb_reply('denied')
end
-- A grant's call parked between two requests (park_server_call.lua, ask_grant_input.lua) is due: queued
-- for any worker, which polls its task, or fails it when its time is up. One whose worker stopped while
-- it held it is queued again the same way, a few times at most.
if rec and rec.kind == 'server' and rec.gt and sb_session_live(S)
    and (rec.state == 'parked' or (rec.state == 'running' and (rec.gt.lapses or 0) < SB_GRANT_LAPSES)) then
  if rec.state == 'running' then rec.gt.lapses = (rec.gt.lapses or 0) + 1 end
  rec.state = 'queued'
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  redis.call('ZREM', SB_P.deadlines, member)
  sb_owe('t|' .. S.sid .. '|' .. S.call_id)
  return sb_reply('queued')
end
local live = {dispatched = true, acked = true, running = true, waiting = true}
if not rec or not live[rec.state] or not sb_session_live(S) then
  redis.call('ZREM', SB_P.deadlines, member)
  return sb_reply('settled')
end
if rec.kind == 'server' then
  sb_fail_call(S, S.call_id, rec, 'interrupted', A.interrupted)
elseif rec.state == 'waiting' then
  sb_fail_call(S, S.call_id, rec, 'client_gone', 'no client named ' .. rec.cname .. ' offering ' .. rec.tool
    .. ' came back within ' .. ((rec.to or tonumber(A.result_ms)) / 1000) .. ' s of the call\'s first dispatch ('
    .. (rec.to and 'the tool\'s timeout_s' or 'the deployment\'s result deadline') .. ')')
elseif rec.state == 'dispatched' then
  sb_fail_call(S, S.call_id, rec, 'ack_timeout', A.ack_text)
elseif rec.hb and not rec.pz and S.now < sb_result_limit(S, rec, tonumber(A.result_ms)) then
  sb_fail_call(S, S.call_id, rec, 'result_timeout', 'the client sent neither progress nor a result within '
    .. (rec.hb / 1000) .. ' s (the tool\'s heartbeat_s)')
elseif rec.to then
  sb_fail_call(S, S.call_id, rec, 'result_timeout', 'the client acknowledged the call but did not answer within '
    .. (rec.to / 1000) .. ' s (the tool\'s timeout_s)')
else
  sb_fail_call(S, S.call_id, rec, 'result_timeout', A.result_text)
end
return sb_reply('failed')

-- Library: the context of the scripts that act on one call. Needs lib/core.lua and lib/partition.lua.
-- A script that takes `--!layout lib/call.lua` is handed these first:
--
--!key meta      the session's record (hash)
--!key events    its event log (stream)
--!key calls     its call records (hash)
--!key owed      the calls still owed an answer (hash)
--!key run       its active run (hash)
--!arg channel  the session's live channel
--!arg sid      the session id
--!arg call_id  the call acted on
--!arg cid      the client acting ('' when acting for none)

local function sb_call_context()
  return {
    meta = K.meta, events = K.events, calls = K.calls, owed = K.owed, run = K.run,
    channel = A.channel, sid = A.sid, call_id = A.call_id, cid = A.cid, now = sb_now_ms(),
  }
end

local function sb_call(S)
  local raw = redis.call('HGET', S.calls, S.call_id)
  return raw and sb_read_call(S.calls, S.call_id, raw)
end

-- The call as the client at S.cid may see it: nil when it does not exist or belongs to another
-- registration, which both answer not_found so no client learns of another's calls.
local function sb_own_call(S)
  local rec = sb_call(S)
  -- A call waiting for its client (lib/calls.lua sb_park) belongs to no registration until one takes it.
  if not rec or rec.kind ~= 'client' or rec.client ~= S.cid or rec.state == 'waiting' then return nil end
  return rec
end

-- The refusal for acting on a call that is already settled (or, awaiting approval, not dispatched yet).
local function sb_settled_refusal(S, rec)
  if rec.state == 'failed' then return sb_refuse('conflict', 'call_failed', S.call_id, rec.reason) end
  if rec.state == 'denied' then return sb_refuse('conflict', 'call_denied', S.call_id) end
  if rec.state == 'awaiting' then return sb_refuse('conflict', 'call_awaiting', S.call_id) end
  return sb_refuse('conflict', 'call_answered', S.call_id)
end

-- An approval that waits at most `waits` ms (its policy's approval_timeout_s; nil or '' for ever): the
-- record keeps when it runs out, and the call's deadline timer (S.sid:call_id, in the index every call
-- deadline is in) comes due then, exact at any length; expire_call.lua resolves it as a deny, unless a
-- person decided first (resolve_approval.lua drops the timer).
local function sb_approval_deadline(S, call_id, rec, waits)
  local ms = tonumber(waits)
  if not ms or ms <= 0 then return end
  rec.ato = ms
  rec.expires = S.now + ms
  sb_timer(SB_P.deadlines, rec.expires, S.sid .. ':' .. call_id)
end

-- A decision remembered for the session is kept in its meta hash under this prefix and the model-visible
-- tool name: `<allow|deny>|<resolved_by>|<deny message>`.
local SB_REMEMBER = 'remember:'

-- The error result of a denied call.
local function sb_denial(call_id, message)
  local text = 'the user denied this call'
  if message ~= '' then text = text .. ': ' .. message end
  return sb_ev_tool_result(call_id, '[' .. sb_rec_text_block(text) .. ']', true)
end

-- Decides a call that needs approval by the decision remembered for its tool: `approval_resolved` with
-- `remembered: true` (and who decided first), then the denial's error result for a deny. Returns the
-- outcome: 'allow', or 'denied' (settled here) and the denial's `tool_result` as stored.
local function sb_remembered(S, call_id, remembered)
  local first = string.find(remembered, '|', 1, true)
  local second = string.find(remembered, '|', first + 1, true)
  local decision, by, message = string.sub(remembered, 1, first - 1), string.sub(remembered, first + 1, second - 1),
    string.sub(remembered, second + 1)
  local deny = (decision == 'deny' and message ~= '') and message or nil
  sb_append(S, sb_ev_approval_resolved(call_id, decision, deny, by, nil, true))
  if decision == 'allow' then return 'allow' end
  return 'denied', (sb_append(S, sb_denial(call_id, message)))
end

-- A call's deadline (ack, result, or a server call's lease): its entry in the deadline index, which the
-- timekeeper fires (expire_call.lua).
local function sb_set_deadline(S, ms)
  sb_timer(SB_P.deadlines, S.now + ms, S.sid .. ':' .. S.call_id)
end

-- While a call has open input requests (record field `iro`: their ids, oldest first; ask_input.lua) it
-- waits on a person, not on its client: its result deadline and heartbeat are paused (`pz`: since when,
-- ms), and only its tool's own timeout_s, counted from the ack, still runs. `pd` sums the time paused,
-- which moves the deployment's result deadline on (a tool's timeout_s is not moved).

-- The latest an acked call may get its result (ms): its tool's timeout_s after the ack, else the
-- deployment's result deadline (`default_ms`) after it plus the time it waited on a person.
local function sb_result_limit(S, rec, default_ms)
  return (rec.acked_ms or S.now) + (rec.to or (default_ms + (rec.pd or 0)))
end

-- The first open request of a call pauses its deadlines: the tool's timeout_s stays due, or none is.
local function sb_pause_deadline(S, rec)
  rec.pz = S.now
  if rec.to then
    sb_timer(SB_P.deadlines, (rec.acked_ms or S.now) + rec.to, S.sid .. ':' .. S.call_id)
  else
    redis.call('ZREM', SB_P.deadlines, S.sid .. ':' .. S.call_id)
  end
end

-- The last open request answered: the deadline runs again, a whole heartbeat from now when the tool has
-- one (the client was waiting, not stuck), never past the result limit.
local function sb_resume_deadline(S, rec, default_ms)
  rec.pd = (rec.pd or 0) + (S.now - (rec.pz or S.now))
  rec.pz = nil
  local due = sb_result_limit(S, rec, default_ms)
  if rec.hb and S.now + rec.hb < due then due = S.now + rec.hb end
  sb_timer(SB_P.deadlines, due, S.sid .. ':' .. S.call_id)
end

-- How long an acked call may go without a result (ms): the tool's own timeout or the deployment's
-- `default_ms`, or its heartbeat when that is sooner (a progress moves it on: progress_call.lua).
local function sb_result_window(rec, default_ms)
  local limit = rec.to or default_ms
  if rec.hb and rec.hb < limit then return rec.hb end
  return limit
end

-- Moves a dispatched call to acked: the ack deadline is swapped for the result deadline, and the call's
-- entry is settled in its registration's pool group (`pool` = {stream, group}) and deleted from the
-- stream, so no pool member is handed it again.
local function sb_ack(S, rec, result_ms, pool)
  sb_set_deadline(S, result_ms)
  -- Only an entry a pool member took (pool_take.lua sets `member`) is pending in the group.
  if rec.entry and rec.member then redis.call('XACK', pool[1], pool[2], rec.entry) end
  -- No member is handed an acked call (pool_take.lua skips it), so its entry goes now rather than with
  -- the age trim: a parked call's lone entry would keep its stream's first node, a listpack Redis
  -- preallocates at up to 4 KiB, for weeks. Left empty with no pool group on it, the stream goes too (an
  -- empty one still holds some 0.4 KiB; the next dispatch makes it again). The record stops counting the
  -- entry (`sb`).
  if rec.entry and redis.call('XDEL', pool[1], rec.entry) == 1 and redis.call('XLEN', pool[1]) == 0
      and #redis.call('XINFO', 'GROUPS', pool[1]) == 0 then
    redis.call('DEL', pool[1])
  end
  rec.sb = nil
  rec.state = 'acked'
  rec.acked_ms = S.now
  sb_count('calls_acked')
  -- A call's stream entry id is its dispatch time in ms.
  sb_observe_ms('dispatch_to_ack', S.now - tonumber(string.match(rec.entry or '', '^%d+') or S.now))
  local event, seq = sb_append(S, sb_ev_client_tool_acked(S.cid, S.call_id))
  -- The event stays in the log; the record keeps its seq, so a result does not decode and encode it again.
  rec.ack_seq = seq
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  return event
end

-- The `client_tool_acked` event of an acked call, as first sent (records written before `ack_seq` hold it).
local function sb_ack_event(S, rec)
  if rec.ack then return rec.ack end
  local found = redis.call('XRANGE', S.events, rec.ack_seq .. '-0', rec.ack_seq .. '-0')
  return found[1][2][2]
end

-- Sends a client call to its registration: its call stream (for pools), `client_tool_dispatched`, and
-- the ack deadline. `dispatch` is the event body without seq; returns the event as stored, and its seq.
local function sb_dispatch(S, rec, stream, dispatch, ack_ms, retention_ms)
  rec.state = 'dispatched'
  -- A call that may wait for its client (on_leave 'wait') keeps when it was first sent, which its wait's
  -- deadline counts from, and the body it is sent again with; other calls' records are as they were.
  if rec.ol then
    rec.fd = rec.fd or S.now
    rec.dispatch = dispatch
  end
  sb_count('calls_dispatched')
  redis.call('HSET', S.owed, S.call_id, rec.client)
  local event, seq = sb_append(S, dispatch)
  -- The entry id lets the ack settle the entry in a pool's consumer group (pool_take.lua).
  rec.entry = redis.call('XADD', stream, 'MINID', '~', S.now - retention_ms, '*', 'call', S.call_id, 'e', event)
  rec.sb = #event + #S.call_id + SB_ENTRY
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  sb_set_deadline(S, ack_ms)
  return event, seq
end

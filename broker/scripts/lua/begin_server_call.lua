-- A worker takes a queued server call: it runs until its lease (renewed while it runs) lapses, after
-- which the call fails as interrupted. The work entry that brought it is done with either way.
--
-- A grant's call that a worker parked (park_server_call.lua, ask_grant_input.lua) is taken again the
-- same way, with what it parked (`gt`: the task it follows, or the input round answered) and the time
-- left of its grant's timeout_s; and a settled one whose task is still owed a `tasks/cancel` at its server
-- (lib/calls.lua sb_fail_call) is handed out once for that.
--
--!layout lib/call.lua   (cid is '')
--!arg lease_ms    the lease (ms)
--!arg entry       the work entry id ('' for none)
--
-- Returns {'ok', 'run', tool, arguments JSON, source ('' for the deployment's own tools, `mcp:<grant>`),
-- the parked state JSON ('' for none), ms left of the call's time (-1 for none kept)},
-- {'ok', 'cancel', source, task id}, or {'ok', 'stale'} (settled, or another worker holds it).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
sb_work_done(A.entry)
local rec = sb_call(S)
if rec and rec.kind == 'server' and rec.gt and rec.gt.cx and rec.state ~= 'running' and rec.state ~= 'queued'
    and rec.state ~= 'parked' then
  local task = rec.gt.task
  rec.gt = nil
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  return sb_reply('cancel', rec.src or '', task)
end
if not rec or rec.kind ~= 'server' or rec.state ~= 'queued' or not sb_session_live(S) then
  return sb_reply('stale')
end
rec.state = 'running'
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_set_deadline(S, tonumber(A.lease_ms))
local parked, left = '', -1
if rec.gt then
  parked = cjson.encode(rec.gt)
  left = math.max(0, rec.gt.ov - S.now)
end
return sb_reply('run', rec.tool, rec.args, rec.src or '', parked, left)

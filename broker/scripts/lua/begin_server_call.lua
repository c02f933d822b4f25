-- A worker takes a queued server call: it runs until its lease (renewed while it runs) lapses, after
-- which the call fails as interrupted. The work entry that brought it is done with either way.
--
--!layout lib/call.lua   (cid is '')
--!arg lease_ms    the lease (ms)
--!arg entry       the work entry id ('' for none)
--
-- Returns {'ok', 'run', tool, arguments JSON, source ('' for the deployment's own tools, `mcp:<grant>`)} or
-- {'ok', 'stale'} (settled, or another worker holds it).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
sb_work_done(A.entry)
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'queued' or not sb_session_live(S) then
  return sb_reply('stale')
end
rec.state = 'running'
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_set_deadline(S, tonumber(A.lease_ms))
return sb_reply('run', rec.tool, rec.args, rec.src or '')

-- Records an MCP server's progress on a server call it is running: `tool_progress`, which readers see only
-- when they ask for it (?include=progress). Progress is a courtesy: for a call no longer running, or when
-- the session's storage is full, nothing is written.
--
--!layout lib/call.lua   (cid is '')
--!arg event       the tool_progress event JSON
--
-- Returns {'ok', 'logged' | 'stale' | 'full'}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
if sb_room(S.meta, S.now, #A.event + SB_ENTRY, SB_P.cap) then return sb_reply('full') end
sb_append(S, A.event)
return sb_reply('logged')

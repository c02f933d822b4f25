-- Records an MCP server's progress on a server call it is running: `tool_progress`, which readers see only
-- when they ask for it (?include=progress). Progress is a courtesy: for a call no longer running, or when
-- the session's storage is full, nothing is written.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] is '').  ARGV[5] tool_progress event JSON
-- Returns {0, 'logged' | 'stale' | 'full'}.

--!layout lib/call.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
if sb_room(S.meta, S.now, #ARGV[5] + SB_ENTRY, SB_P.cap) then return sb_reply('full') end
sb_append(S, ARGV[5])
return sb_reply('logged')

-- Creates a session on an agent's live version: its record, its first token and `session_created`, all
-- at once. The workspace's indexes (another slot) are the caller's: it writes them before this script,
-- and readers of those indexes skip an id whose session does not exist.
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] tokens
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] agent id  ARGV[4] version id  ARGV[5] display name
-- ARGV[6] created_by JSON  ARGV[7] workspace id  ARGV[8] token hash  ARGV[9] token record JSON
-- ARGV[10] message concurrency policy  ARGV[11] debounce ms (the version's, fixed for the session's life)
-- ARGV[12] retention ms (0: kept for ever): when the session's retention is first checked
-- (retain_session.lua, through the partition's purge index, member `r|<session id>`)
-- ARGV[13] settled-call retention ms (0: none): when its settled calls are first trimmed (trim_calls.lua,
-- member `c|<session id>`)
-- Returns {0, 'created' | 'exists', created_at ms}.

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = KEYS[1], events = KEYS[2], channel = ARGV[1], now = sb_now_ms()}
local existing = redis.call('HGET', S.meta, 'created_at')
if existing then return sb_reply('exists', tonumber(existing)) end
redis.call('HSET', S.meta, 'id', ARGV[2], 'agent_id', ARGV[3], 'agent_version_id', ARGV[4],
  'display_name', ARGV[5], 'created_by', ARGV[6], 'workspace_id', ARGV[7], 'created_at', S.now, 'seq', 0,
  'policy', ARGV[10], 'debounce_ms', ARGV[11])
redis.call('HSET', KEYS[3], ARGV[8], ARGV[9])
local retention = tonumber(ARGV[12])
if retention > 0 then sb_timer(SB_P.purges, S.now + retention, 'r|' .. ARGV[2]) end
local settled = tonumber(ARGV[13])
if settled > 0 then sb_timer(SB_P.purges, S.now + settled, 'c|' .. ARGV[2]) end
sb_append(S, '{"type":"session_created","agent_id":' .. sb_str(ARGV[3]) .. ',"agent_version_id":'
  .. sb_str(ARGV[4]) .. '}')
return sb_reply('created', S.now)

-- Deletes a session. Its active run ends first (owed calls fail with run_gone, then run_cancelled), and
-- so does every queued run, so live streams see each run end; then `deleted` goes out on the channel,
-- the session leaves its partition's indexes, and the log and state go. The record and tokens stay as a
-- tombstone for `tombstone_ms`, so the session's own tokens get not_found (not unauthorized) from then on. Per-client keys
-- are purged later by the timekeeper (purge index), and the workspace's session indexes are left by the
-- caller (another slot).
--
--!layout lib/run.lua   (run_id is '')
--!key tokens        the session's tokens
--!key session_schedules the session's schedules
--!arg tombstone_ms  how long the record and tokens stay (ms)
--!arg gone_text     text for run_gone
--
-- Returns {'ok', the id of the run it ended ('' for none)}; refusal not_found.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/session.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local ended = sb_delete_session(S, K.tokens, K.session_schedules, A.tombstone_ms, A.gone_text)
return sb_reply(ended)

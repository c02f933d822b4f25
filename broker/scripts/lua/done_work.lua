-- A work entry needs nothing more (a run-scoped client released, an entry a worker found it cannot use):
-- acknowledged, deleted, its claim dropped.
--
-- KEYS: the partition's keys only (lib/partition.lua).
--!arg entry       the entry id
--
-- Returns {'ok'}.

--!include lib/core.lua
--!include lib/partition.lua

sb_work_done(A.entry)
return sb_reply()

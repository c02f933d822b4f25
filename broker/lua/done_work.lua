-- A work entry needs nothing more (a run-scoped client released, an entry a worker found it cannot use):
-- acknowledged, deleted, its claim dropped.
--
-- KEYS: the partition's keys only (lib/partition.lua).
-- ARGV[1] entry id
-- Returns {0}.

--!include lib/core.lua
--!include lib/partition.lua

sb_work_done(ARGV[1])
return {0}

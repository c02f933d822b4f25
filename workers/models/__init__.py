"""Models a run can call: the built-in scripted one here; provider adapters beside it."""

"""The Lua scripts: their declarations and build (`source`), loading and running them by name (`runner`),
the group commit of the hot routes (`batching`), and the names of the script families' keys (`layouts`)."""

"""The Redis transport: connecting (one Redis or a Cluster), the lean connection pool, the Cluster's slot
map and its one redirect loop, the typed commands the services send (and their route on a Cluster), and
the embedded `redis-server`."""

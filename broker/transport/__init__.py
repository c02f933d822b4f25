"""The Redis transport: connecting (one Redis or a Cluster), the lean connection pool, the Cluster's slot
map and its one redirect loop, the routed client, and the embedded `redis-server`."""

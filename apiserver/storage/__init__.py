"""Storage: the durable SQLite log with group commit (`log`), the in-memory watch cache (`cache`),
and the store that ties them together with revisions and optimistic concurrency (`store`)."""

"""Sources that stay in sync on their own: folders, web pages, sitemaps, S3 prefixes and WebDAV folders,
polled on a schedule (and watched, for folders), their changes turned into ingest jobs in the durable
queue, with retries, dead letters and a circuit breaker per source.

The library's catalog is the truth of what is indexed: a poll compares a source's listing with the
revisions the catalog holds, so a poll, a job or the whole service killed at any point loses no
change (the next poll sees it again) and duplicates no document (ids come from the source)."""

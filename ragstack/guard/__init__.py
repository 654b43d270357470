"""Everything that leaves the process goes through here: URLs fetched (urls), databases opened
(databases), server files read (paths)."""

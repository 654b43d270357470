"""Store access shared by ingest (the single writer) and retrieve (readers)."""

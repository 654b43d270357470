"""The `ragstack` command."""

"""The project's own evaluation commands (`ragstack eval ...`)."""

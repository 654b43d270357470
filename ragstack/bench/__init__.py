"""The project's own benchmark commands (`ragstack bench ...`)."""

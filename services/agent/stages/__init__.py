"""The stages of the answer path, in order: route -> gather -> grade -> draft -> verify -> cite.

Each takes the typed output of the ones before it and returns its own; each records what it did in
the query's `QueryTrace`. Gather and draft stream events while they run, so they are async
generators that yield their result last. `ask.Agent` runs them in turn.
"""

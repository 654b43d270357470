"""The gateway's routes, one module per resource."""

from gateway.routes import admin, databases, documents, feedback, graph, ingest, query, sources, traces, ui

ROUTERS = (
    admin.router,
    query.router,
    ingest.router,
    sources.router,
    documents.router,
    graph.router,
    databases.router,
    traces.router,
    feedback.router,
    ui.router,
)

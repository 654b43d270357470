"""The gateway's routes, one module per resource."""

from gateway.routes import admin, databases, documents, ingest, query, traces

ROUTERS = (admin.router, query.router, ingest.router, documents.router, databases.router, traces.router)

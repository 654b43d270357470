"""gRPC plumbing shared by every service: server bootstrap, the error interceptor, typed clients."""

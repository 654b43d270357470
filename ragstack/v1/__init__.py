"""Generated protobuf and gRPC stubs for ragstack.v1 (scripts/gen_protos.sh). Do not edit."""

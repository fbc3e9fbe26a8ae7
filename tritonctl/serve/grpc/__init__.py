"""Triton's ``inference.GRPCInferenceService`` over grpc.aio, plus the standard health service."""

"""Transport-free data plane: requests, model manager, batcher, statistics."""

"""Helpers the tests share: models and repositories made in code, the CLI runner, the corpus


harness, a simulated batching server and the real Triton anchor. ``pythonpath`` in
pyproject.toml puts tests/ on the path, so a test imports them as ``helpers.<module>``."""

"""Deployment manifests for a model repository: KServe InferenceServices (kserve.py)."""

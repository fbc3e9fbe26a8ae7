"""The process a Python model instance runs in when the server isolates Python models
(``--python-isolation process``), as Triton's ``triton_python_backend_stub``: ``main`` is the
stub's side, ``wire`` the protocol both sides speak. Nothing here imports more than the standard
library and numpy, so the stub runs under a model's own ``EXECUTION_ENV_PATH`` Python."""

"""tritonctl: build, validate, serve and tune Triton model repositories."""

__version__ = "0.1.0"

"""The load generator behind ``tritonctl perf``, which ``tritonctl analyze`` measures with."""

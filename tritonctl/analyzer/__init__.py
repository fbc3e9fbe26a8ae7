"""Configuration search under load (`tritonctl analyze`): the search space and strategies, the
engines that run candidates, and the report. It measures with tritonctl.perf."""

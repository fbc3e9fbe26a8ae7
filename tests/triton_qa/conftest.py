"""The upstream QA files are run by run_suites.py against a server it starts, never collected
by pytest directly (their names match pytest's *_test.py)."""

collect_ignore = ["upstream", "standins"]

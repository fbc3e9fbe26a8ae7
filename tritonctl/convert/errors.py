"""The one error type the build pipeline raises for users."""


class BuildError(Exception):
    """The build cannot go on; the message says what is wrong and how to fix it."""

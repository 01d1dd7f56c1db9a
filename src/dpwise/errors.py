"""dpwise's own error type: a user mistake, shown as one line and exit code 2."""


class DpwiseError(Exception):
    """A problem the user can fix. The message says what was received, what was expected and how."""

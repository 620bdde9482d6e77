"""The one exception type the CLI turns into a one-line error and exit code."""


class HushmonError(Exception):
    """A user-facing error: bad input, a missing file, a failed run.

    The CLI prints ``hushmon: <message>`` and exits with ``exit_code``; no
    traceback reaches the user.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

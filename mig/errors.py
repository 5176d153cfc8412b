"""The one error type the domain raises for bad input."""


class MigError(ValueError):
    """Bad input, with a message meant for the user: what is wrong, the value, what is allowed.

    `path` is the key path of the offending value (for example `mig-inference:pools[0].mig`)
    when the error comes from configuration.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)

    def at(self, path: str) -> "MigError":
        """The same error placed under a key path (an inner path is appended to it)."""
        if self.path:
            joined = self.path if self.path.startswith(("[", ".")) else f".{self.path}"
            return MigError(self.message, f"{path}{joined}")
        return MigError(self.message, path)

"""The one exception the data layer raises on purpose."""


class DataError(ValueError):
    """User data (a file, a sample name or an option) cannot be used.

    The message says what is wrong and what to do about it; it is meant to be
    shown to the user as it is.
    """

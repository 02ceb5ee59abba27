"""Errors the exporter raises for bad use. The CLI prints them without a traceback."""


class ExportError(Exception):
    """Bad input or bad use: the message says what, where, and how to fix it."""

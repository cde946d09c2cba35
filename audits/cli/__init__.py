"""The ``audit`` command line."""

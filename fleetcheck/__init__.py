"""fleetcheck: prove, for a whole vLLM fleet, which fixes each box's code on disk has."""

__version__ = "0.1.0"

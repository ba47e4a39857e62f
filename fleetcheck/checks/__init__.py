"""Pure functions from probe facts to verdicts; one module per family of checks."""

"""Renderers: terminal (rich), HTML (jinja2), all from a RunResult."""

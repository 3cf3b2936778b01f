"""Renderers of an archived run: a JSON-able summary and a terminal view."""

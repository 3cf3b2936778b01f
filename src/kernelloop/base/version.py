"""The version of kernelloop (`kernelloop.__version__`), in a module of its own so that code inside the package can
read it without importing the package facade (kernelloop/__init__.py imports from every floor, lazily)."""

__version__ = "0.1.0"

"""kernelloop.base: the base floor: typed records, the built-in ops, small shared helpers."""

"""kernelloop.deliver: the delivery floor: capture, package, apply, fusion, reports, agents, the Python API."""

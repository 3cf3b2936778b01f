"""Least privilege for processes that import candidate code, and the secrets kept from them.

- `policy`: the audit-hook sandbox (`install`, `default_policy`) and the OS layer (`os_layer`, `wrap_command`);
- `events`: what an audit event asks of files and processes (the stateless half of the hook's check);
- `confine`: the read-only view of a confined child (a mount namespace), set up before anything else;
- `keys`: the run key, which no process importing candidate code may read;
- `census`: the thread census of a worker process.

Nothing here imports the rest of kernelloop beyond `kernelloop.base.records` (docs/architecture.md: the bottom of the
core layer), and importing this package imports none of its modules (a confined child imports `confine` first).
"""

"""The build stage: static rules, gates and compilation of candidates on the host's CPU cores, ahead of the GPU
stage (stage.py: the pool; steps.py: the steps and the seam for new ones; server.py: the build processes)."""

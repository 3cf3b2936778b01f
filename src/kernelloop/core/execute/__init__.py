"""Running candidates: spawned worker processes, never the controller's."""

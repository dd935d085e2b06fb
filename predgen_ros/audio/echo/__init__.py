"""The robot's own voice kept out of what it hears: the echo canceller and the guarded voice detector."""

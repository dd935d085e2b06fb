"""The robot's voice: Piper synthesis, the first clause cut, sinks and the player."""

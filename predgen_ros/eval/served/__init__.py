"""The served engine at work: a model server on this machine, robots sharing it."""

"""The PredGen engine: no ROS, no audio. See session.py for the entry point."""

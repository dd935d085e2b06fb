"""Speech over the robot's reply (barge-ins, acknowledgements, noise) through the live graph."""

"""The whole graph at work: the demo, the soak, the robot/workstation split, the CPU budget, the text user."""

"""The virtual-clock benchmark of the policies: simulated users, one loaded model, no ROS."""

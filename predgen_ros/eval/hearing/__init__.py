"""What the robot hears: recognizers, rooms, the robot's echo, endpoint rules, offline and replayed."""

"""rclpy nodes: thin wiring of topics and parameters to the engine and audio code."""

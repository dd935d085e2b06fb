"""Audio backends: speech synthesis (and, later, ASR and sinks). No ROS, no LLM."""

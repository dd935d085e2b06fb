"""Audio backends: streaming ASR, Piper speech synthesis, audio sinks. No ROS, no LLM."""

"""What a served gateway hosts besides HTTP: definitions, connections, change feed, metrics, keys, LLM, logs."""

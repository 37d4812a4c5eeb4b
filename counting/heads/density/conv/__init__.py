"""The convolutional density head at stride 8: the head, its fitting with torch, its training inside `counting train`, its section of a model file."""

"""Training the crowd network: crops, degradations, losses, the resumable loop (issue 48)."""

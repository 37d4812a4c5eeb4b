"""The trained crowd network as a density head (issue 48)."""

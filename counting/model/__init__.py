"""Stage 4, the model file: its schema and CountingModel (a fitted head plus everything needed to apply it)."""

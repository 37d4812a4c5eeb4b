"""Stage 5, a dataset -> a model file: the training pipeline."""

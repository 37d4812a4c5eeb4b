"""Stage 1, pictures in: image loading, image paths from the command line, dataset readers and their splits."""

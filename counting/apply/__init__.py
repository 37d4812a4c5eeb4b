"""Stage 5, a model on new pictures: counting in bounded chunks, video and streams, smoothing, distributed extraction."""

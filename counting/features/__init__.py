"""Stage 2, pictures -> descriptors and feature maps: backbones, descriptor kinds, layouts, tiles,
batched extraction with an on-disk cache.

```python
from counting.features import extract_features, FeatureCache, Preprocessing, get_backbone
backbone = get_backbone("efficientnet-lite0")
fs = extract_features(paths, backbone, Preprocessing(224), cache=FeatureCache(), on_error="skip")
fs.features, fs.ok, fs.errors
```
The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`):
importing ``counting.features.tiles`` does not load torch.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        # extraction and its cache
        ".cache": "FeatureCache default_cache_dir",
        ".extract": "FeatureSet configure_torch_threads extract_descriptor_sets extract_features prepare_path",
        # backbones and their runtimes
        ".backbones": "BACKBONES Preprocessing get_backbone configure_runtime",
        ".backbones.runtime": "RUNTIMES available_cpus cpu_description default_threads",
        ".detector.backbone": "DetectorBackbone",
        ".detector": "DETECTOR_PERSON=PERSON detect_counts",
        # the detector's own pieces (its studies re-run the network at other inputs)
        ".detector.decode": "COCO_TO_VOC decode_detections",
        ".detector.runner": "CenterNet DETECTOR_INPUT_NAME=INPUT_NAME ensure_detector_onnx=ensure_onnx resize_tf_bilinear",
        ".detector.evidence": "PERSON_QUANTITIES person_evidence",
        ".detector.descriptor": "DETECTOR_THRESHOLDS=THRESHOLDS",
        # descriptor kinds, layouts and tiles
        ".descriptors": "Descriptor DescriptorSpec parse_descriptor",
        ".layouts": "training_rows predict_rows frame_counts",
        ".tiles": "parse_grid tile_counts",
    },
)

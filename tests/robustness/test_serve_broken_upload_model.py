"""POST /api/count when serve's upload model is a broken file: the service answers 503 naming the
model file and what is wrong with it, not a 422 that blames the picture (the upload model is
loaded at the first upload, so a broken file shows only then)."""

from __future__ import annotations

from pathlib import Path

from robust_helpers import DEFAULT_MODEL
from test_serve_uploads import refused, served

from counting.apply.serve.config import load_config
from counting.apply.serve.service import Service


def test_a_broken_upload_model_is_a_503_naming_the_file(tmp_path: Path, mall_root: Path) -> None:
    broken = tmp_path / "broken.npz"
    broken.write_bytes(Path(DEFAULT_MODEL).read_bytes()[:5000])  # cut short: not a model file
    config = tmp_path / "serve.toml"
    config.write_text(f'[server]\nmodel = "{broken}"\ndatabase = "h.sqlite"\n', encoding="utf-8")
    picture = (mall_root / "frames" / "seq_000005.jpg").read_bytes()
    with served(Service(load_config(config))) as api:
        response = api.post("/api/count", content=picture, headers={"Content-Type": "image/jpeg"})
        detail = refused(response, 503)
        assert str(broken) in detail and "cannot count" in detail and "picture" not in detail
        # Nothing broken is kept: the next upload reads the file again, still broken, still 503.
        assert refused(api.post("/api/count", content=picture, headers={"Content-Type": "image/jpeg"}), 503)

"""A model file edited so that it no longer fits its own parts (descriptor, feature maps, class
names, density head layers or grid) is refused in one line naming the file, before any counting."""

from __future__ import annotations

from pathlib import Path

from robust_helpers import REPO_ROOT, assert_one_error, make_image, model_parts, write_model

MALL_SUMS = REPO_ROOT / "models" / "mall-sums.npz"


def _edited_descriptor(tmp_path: Path, spec: str) -> Path:
    arrays, document = model_parts(MALL_SUMS)
    document["user_metadata"]["descriptor"]["spec"] = spec
    return write_model(tmp_path / "edited.npz", arrays, document)


def test_model_whose_descriptor_no_longer_fits_its_regressor_names_the_model_file(cli, tmp_path: Path) -> None:
    # levels=1+2 -> levels=1: the spec still parses, but gives 5x fewer numbers than the regressor takes.
    model = _edited_descriptor(tmp_path, "sum:block4+block7+block10+block14,perspective")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    line = assert_one_error(cli("count", "-m", model, image), str(model), "gives 424 numbers", "takes 2120")
    assert not line.startswith("error: features:"), line


def test_model_naming_an_unknown_feature_map_names_the_model_file(cli, tmp_path: Path) -> None:
    model = _edited_descriptor(tmp_path, "sum:block99+block7,perspective,levels=1+2")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    assert_one_error(cli("count", "-m", model, image), str(model), "no feature map 'block99'")


def test_model_edited_to_class_scores_is_refused_before_counting(cli, tmp_path: Path) -> None:
    model = _edited_descriptor(tmp_path, "scores")
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    assert_one_error(cli("count", "-m", model, image), str(model), "'scores' gives 1000 numbers", "takes 2120")


def test_per_class_model_with_a_repeated_class_name_is_refused(cli, tmp_path: Path) -> None:
    # Was: exit 0, a CSV with repeated columns and a JSON whose keys merged the classes' counts.
    arrays, document = model_parts(REPO_ROOT / "models" / "voc20.npz")
    names = document["user_metadata"]["class_names"]
    names[1] = names[0]
    model = write_model(tmp_path / "renamed.npz", arrays, document)
    image = make_image(tmp_path / "photo.png")
    out = tmp_path / "counts.json"
    assert_one_error(cli("count", "-m", model, image, "--json", out), str(model), "'aeroplane' is named twice")
    assert not out.exists()


def test_density_model_with_edited_head_layers_or_grid_is_refused_naming_the_file(
    cli, tmp_path: Path, mall_root: Path
) -> None:
    # Were tracebacks (a channel-count ValueError, a broadcast error) and a message without the file.
    trained = tmp_path / "density.npz"
    split = "train=1-30,test=31-34"
    result = cli("train", "-d", "mall", "-r", mall_root, "--split", split, "-o", trained, "--density-head")
    assert result.exit_code == 0, result.output

    def edited(name: str, change) -> Path:
        arrays, document = model_parts(trained)
        change(document["user_metadata"]["density_head"])
        return write_model(tmp_path / name, arrays, document)

    image = make_image(tmp_path / "frame.png", size=(640, 480))
    layers = edited("layers.npz", lambda head: head.update(layers=head["layers"][1:]))
    assert_one_error(cli("count", "-m", layers, image), str(layers), "channels but the head takes")
    unknown = edited("unknown.npz", lambda head: head.update(layers=["block99"]))
    assert_one_error(cli("count", "-m", unknown, image), str(unknown), "'block99'")
    grid = edited("grid.npz", lambda head: head["settings"].update(grid=[3, 3]))
    assert_one_error(cli("count", "-m", grid, image), str(grid), "gives 10 sums per image", "takes 1")
    zero = edited("zero.npz", lambda head: head["settings"].update(grid=[0, 2]))
    assert_one_error(cli("count", "-m", zero, image), str(zero), "settings.grid")
    assert cli("count", "-m", trained, image).exit_code == 0

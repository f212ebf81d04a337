"""The data of a sample project that ships files (sample_digits): its calibration samples, its labelled evaluation
dataset and the `evaluate:` lines of its experiment. NumPy only: `np workspace init` does not import torch, and
the shipped files were checked when they were made (np_optimizer.models.digits)."""

from __future__ import annotations

import shutil
from pathlib import Path

from np_optimizer.evaluate.inputs import EVALUATION_KEY
from np_optimizer.files import write_json
from np_optimizer.samples import SAMPLE_DATA, SampleProject
from np_optimizer.workspace import PROJECT_FILE, Project, utc_now

__all__ = ["add_sample_data"]


def add_sample_data(project: Project, experiment: Path, sample: SampleProject) -> None:
    import numpy as np

    info = project.info
    if sample.calibration:
        folder = project.root / "data" / "calibration"
        folder.mkdir(parents=True, exist_ok=True)
        with np.load(SAMPLE_DATA / sample.calibration, allow_pickle=False) as archive:
            for index, sample_input in enumerate(archive["inputs"]):
                np.save(folder / f"{index:04d}.npy", sample_input)
        info["calibration_dataset"] = "data/calibration"
    if sample.evaluation_dataset:
        source = SAMPLE_DATA / sample.evaluation_dataset
        target = project.root / "data" / "evaluation"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / source.name)
        with np.load(source, allow_pickle=False) as archive:
            labels = archive["labels"]
        info[EVALUATION_KEY] = {"name": source.stem, "path": "data/evaluation", "format": "tensors",
                                "samples": int(labels.shape[0]), "classes": int(labels.max()) + 1,
                                "transform": {"note": "inputs used as stored"}, "source": f"np sample {source.name}",
                                "added_at": utc_now()}
    write_json(project.root / PROJECT_FILE, info)
    if sample.evaluate:
        run_file = experiment / "run.yaml"
        run_file.write_text(run_file.read_text().rstrip("\n") + "\nevaluate:\n" + "\n".join(sample.evaluate) + "\n")

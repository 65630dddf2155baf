"""The data layer: bundled samples, user files and validation, no UI.

    samples() -> list[SampleInfo]
    load_sample(name, seed=0, *, standardize=False, drop_constant=True, max_rows=None) -> Dataset
    load_file(source, filename=None, *, label_column=None, standardize=False,
              drop_constant=True, missing="keep", max_rows=None, seed=0,
              header=None, image_shape=None, limits=None) -> Dataset
    csv_columns(source, filename=None, *, header=None, limits=None) -> list[str]
    prepare(dataset, *, standardize=False, drop_constant=True, max_rows=None, seed=0,
            missing="keep") -> Dataset            # missing: one of MISSING_MODES
    too_big_message(size, limit, *, upload=True) -> str
    regular_file_size(path) -> int   # stat only: devices, pipes, directories refused unread

Missing cells are NaN in ``Dataset.values`` (``Dataset.observed`` /
``missing_mask`` / ``missing_counts``); rows with missing cells are kept
unless ``missing="drop-rows"`` or ``"impute-mean"`` asks for a complete matrix.

Every failure raises `DataError` with a message meant for the user. Messages,
warnings and summaries are *plain text*: user strings in them (file names,
headers, labels) are quoted with `gplvm_explorer.text.quote`, never escaped,
so every rendering site must escape them (`gplvm_explorer.text.escape`).
"""

from .dataset import Dataset, SampleInfo
from .errors import DataError
from .loading import FORMATS, csv_columns, load_file, regular_file_size, too_big_message
from .prepare import MISSING_MODES, prepare
from .registry import load_sample, samples
from .validation import Limits

__all__ = [
    "FORMATS",
    "DataError",
    "Dataset",
    "Limits",
    "MISSING_MODES",
    "SampleInfo",
    "csv_columns",
    "load_file",
    "load_sample",
    "prepare",
    "regular_file_size",
    "samples",
    "too_big_message",
]

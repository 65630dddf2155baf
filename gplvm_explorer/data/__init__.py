"""The data layer: bundled samples, user files and validation, no UI.

    samples() -> list[SampleInfo]
    load_sample(name, seed=0, *, standardize=False, drop_constant=True, max_rows=None) -> Dataset
    load_file(source, filename=None, *, label_column=None, standardize=False,
              drop_constant=True, drop_missing_rows=True, max_rows=None, seed=0,
              header=None, image_shape=None, limits=None) -> Dataset
    csv_columns(source, filename=None, *, header=None, limits=None) -> list[str]
    prepare(dataset, *, standardize=False, drop_constant=True, max_rows=None, seed=0) -> Dataset

Every failure raises `DataError` with a message meant for the user.
"""

from .dataset import Dataset, SampleInfo
from .errors import DataError
from .loading import FORMATS, csv_columns, load_file
from .prepare import prepare
from .registry import load_sample, samples
from .validation import Limits

__all__ = [
    "FORMATS",
    "DataError",
    "Dataset",
    "Limits",
    "SampleInfo",
    "csv_columns",
    "load_file",
    "load_sample",
    "prepare",
    "samples",
]

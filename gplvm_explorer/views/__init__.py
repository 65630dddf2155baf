"""Viewer components of the page: each is given the state objects it reads (``View.of(explorer)`` hands them
over by name) and keeps no state of its own."""
from .controls import DataPanel, ModelPanel, PageErrors, StatusBar, TrainingPanel
from .export import ExportPanel
from .imputation import ImputationView, MissingDataChoice
from .latent_map import LatentMap
from .reconstruction import ReconstructionView
from .training_plots import ARDPlot, ObjectivePlot

__all__ = ["ARDPlot", "DataPanel", "ExportPanel", "ImputationView", "LatentMap", "MissingDataChoice", "ModelPanel",
           "ObjectivePlot", "PageErrors", "ReconstructionView", "StatusBar", "TrainingPanel"]

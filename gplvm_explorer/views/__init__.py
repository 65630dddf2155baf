"""Viewer components of the explorer; each reads one ExplorerState."""
from .controls import DataPanel, ModelPanel, StatusBar, TrainingPanel
from .export import ExportPanel
from .latent_map import LatentMap
from .reconstruction import ReconstructionView
from .training_plots import ARDPlot, ObjectivePlot

__all__ = ["DataPanel", "ModelPanel", "TrainingPanel", "StatusBar", "LatentMap", "ReconstructionView",
           "ObjectivePlot", "ARDPlot", "ExportPanel"]

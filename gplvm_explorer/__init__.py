"""GPLVM Explorer: Gaussian-process latent variable models in the browser, notebooks and scripts.

``gplvm_explorer.explore(data, labels=None, **settings)`` returns the app with
``data`` loaded (see `gplvm_explorer.notebook`); importing this package stays
light -- Panel and the engine load on the first call.
"""


def explore(data, labels=None, **settings):
    """The GPLVM Explorer page with ``data`` loaded; see `gplvm_explorer.notebook.explore`."""
    from .notebook import explore as _explore

    return _explore(data, labels, **settings)


__all__ = ["explore"]

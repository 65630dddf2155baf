"""GPLVM Explorer's compute engine: kernels, psi statistics, GP-LVM models, optimisers.

Pure numpy / scipy / numba; never imports a UI library.
"""

"""Short, plain explanations shown next to each view (Markdown)."""

DATA = """\
**Data.** Each row is one data point (N rows), each column one feature (D columns).
Pick a bundled sample or upload a CSV/TSV (header row optional), NPY or NPZ file.
A *label column* only colours the points; it is not used for training.
*Standardise* gives every feature zero mean and unit variance. It is on by default
when the columns' spreads differ more than tenfold (different units: otherwise the
widest column decides the map); the choice you make is kept for that data set only.
Rows are *images* when the column names say so (`pixel_3_4`, `r3c4`, `pixel0`…)
or when you pick a shape (a square number of columns asks first).
Uploading a *saved model* (the NPZ from Export or `gplvm-explorer fit`) opens it
ready to explore, with its data and settings, without training again."""

MODEL = """\
**Model.** The *GP-LVM* (Lawrence 2005) finds latent points X so that a Gaussian
process mapping X → data explains the data; it optimises X directly (exact, O(N³)).
The *sparse GP-LVM* approximates the process with M inducing points (O(NM²)).
The *Bayesian GP-LVM* (Titsias & Lawrence 2010) keeps a Gaussian q(x) per point
and maximises a lower bound on the evidence (the ELBO), so surplus latent
dimensions are switched off automatically by the ARD kernel.
Its *stochastic (SVI)* version (Hensman, Fusi & Lawrence 2013) trains on minibatches of
rows, so an iteration costs the same however many rows there are: for big data (the page
proposes it when the data are beyond what the others handle comfortably).
The *deep GP* (Damianou & Lawrence 2013) stacks Bayesian GP-LVMs: give each layer's
dimensions, data side first (e.g. 5, 2); every layer gets its own latent map.
Q is the number of latent dimensions, M the number of inducing points."""

TRAINING = """\
**Training.** The optimiser improves the objective step by step on a background
thread; the plots update live. *Pause* holds it, *Stop* ends it and keeps the
best fit so far."""

LATENT = """\
**Latent map.** Each dot is one data point placed at its latent position (two
latent dimensions at a time; the others are held at the slider values).
*Variance* shading is the model's predictive variance: **light = confident**
(the model has seen data nearby), **dark = uncertain**. *Magnification* shading
(log scale) is how much the mapping stretches the latent plane into data space
there (sqrt det G of the expected metric, Tosi et al. 2014): distances on the map
are not distances in the data, and **dark** areas are where a small step on the
map is a large change in the output (or where the model is unsure).
Click anywhere to see what the model predicts there; *Geodesic* mode draws the
shortest path between two clicks under that metric."""

RECONSTRUCTION = """\
**Reconstruction.** What the model generates at the clicked latent location —
for image data the predicted image and its ±2σ image (twice the predictive
standard deviation of every pixel: the darker, the less sure), otherwise the
value of every feature with a ±2σ band — beside the nearest training example.
Far from the data (dark shading) the prediction falls back to the data mean
and the uncertainty grows."""

OBJECTIVE = """\
**Objective.** For the Bayesian GP-LVM this is the *ELBO*, a lower bound on
the log evidence log p(Y) (higher is better). For the GP-LVM and sparse
GP-LVM it is the log-likelihood of the data plus the log prior of the latent
points. A flattening curve means the optimiser has (nearly) converged.
The vertical axis zooms to the later iterations (the very first ones may lie
far below the axis)."""

ARD = """\
**ARD relevance.** One bar per latent dimension. *Relevance* is 1/lengthscale²
(RBF) or the weight variance (linear): a bar near zero means the model has
**switched that dimension off** — moving along it changes nothing in the
output. *Lengthscale* shows the same information inverted (long = unused).
**Click a bar** to put that dimension on the map's horizontal axis,
**Shift+click** for the vertical axis."""

EXPORT = """\
**Export.** Latent coordinates (means, variances, labels) as CSV; the trained
model as an NPZ file the engine loads with `engine.io.load_model` (upload it
again, or run `gplvm-explorer model.npz`, to explore it without training); the latent
map as PNG or as an interactive HTML page. The plot toolbar's save button also
downloads a PNG of what you see."""

IMPUTATION = """\
**Imputed values.** Cells missing from the data (empty CSV fields, `NA`, NaN)
are not guessed before training: the Bayesian and sparse GP-LVMs use only the
observed cells of each row. Afterwards the model *fills in* each missing cell:
every other row's latent position is weighed by how well it predicts this
row's observed cells, and the cell gets the weighted prediction with a ±2σ
band (noise included). When the observed cells fit two regions of the map,
both count, and the band is wide. Observed values are shown as
they are. For images, the missing pixels are marked in orange. The exact
GP-LVM cannot use missing cells: its data are completed first (column means
or dropped rows). The CSV export has every value and a `_std` column after
it (0 for observed values)."""

GEODESIC = """\
**Geodesic.** Turn on *Geodesic* above the map and click two places (a click near
a point picks that training row): the path drawn is the shortest one under the
model's expected metric E[J]ᵀE[J] + Σ_d cov(J_d) (Tosi, Hauberg, Vellido & Lawrence
2014), in the two shown dimensions with the others held at the sliders. It is
found on a grid over the map and then smoothed. Its length is measured in the
data (the expected length of its image), beside the straight segment's. The
player walks along the path and shows the model's output at each point; during
training the path follows every new fit."""

GEODESIC_LENGTHS = """\
**Lengths** are in the units of the data the model was trained on (standardised
units when the data were standardised). The metric counts both how far the mean
moves and how uncertain the model is, so paths avoid regions without data —
but only as far as the kernel lets them: with a stationary kernel the metric far
from the data only returns to its prior level (D·σ²/ℓ² for the RBF kernel: a
unit step there has length √D·σ/ℓ), so with long learned lengthscales a
geodesic may rightly cut across an empty region."""

LESSON = """\
**Lesson.** A guided walk from PCA to the GP-LVM, the Bayesian GP-LVM, dynamics,
shared spaces and deep GPs. *Run this step* loads the step's data, sets its model
and trains; the views the step is about are outlined. *Speed* slows the training
down (iterations per second) so a room can watch the map and the ARD bars move.
*Presenter view* shows the essential views only, in large type, for a projector.
A lesson is a JSON file: open your own here or with `gplvm-explorer --lesson FILE`
(the format is described in the project's `docs/lessons.md`)."""

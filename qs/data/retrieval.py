"""Seeded synthetic classes for embedding learning (retrieval of held-out classes); not a
real data set.

Each class is a point in a small latent space; a sample is its class's point plus Gaussian
noise, mapped to the features by a fixed random nonlinear map (tanh of a random projection),
then overlaid with a few shared "style" directions of large variance that carry no class.
Raw features rank a query's class poorly (the style dominates the cosine similarity); an
embedding must learn to undo the map and ignore the style, and what it learns must carry
over to classes it never saw, since every class comes from the same generator.
"""

import numpy as np

__all__ = ["make_retrieval_classes"]


def make_retrieval_classes(
    seed=0,
    *,
    classes=100,
    per_class=30,
    features=64,
    latent=8,
    noise=0.45,
    warp=1.5,
    style=4,
    style_scale=2.0,
):
    """Seeded synthetic classes for learning an embedding that retrieves held-out classes.

    Parameters
    ----------
    seed : int, default 0
        The generator's seed.
    classes : int, default 100
        The number of classes.
    per_class : int, default 30
        Samples per class.
    features : int, default 64
        The features' dimension.
    latent : int, default 8
        The dimension of the latent space of the classes' points.
    noise : float, default 0.45
        The standard deviation of a sample's noise around its class's point.
    warp : float, default 1.5
        The strength of the nonlinear map: ``tanh(warp * z @ projection)``.
    style : int, default 4
        The number of shared style directions, which carry no class.
    style_scale : float, default 2.0
        The standard deviation of the style.

    Returns
    -------
    X : ndarray of shape (classes * per_class, features), float64
        The samples, in class order.
    y : ndarray of shape (classes * per_class,), int64
        Their class, 0..classes-1.
    source : str
        A line saying what the data are.

    Raises
    ------
    ValueError
        When ``classes``, ``per_class``, ``features`` or ``latent`` is not a positive integer.

    Examples
    --------
    >>> X, y, source = make_retrieval_classes(classes=3, per_class=2, features=4)
    >>> X.shape, y.tolist()
    ((6, 4), [0, 0, 1, 1, 2, 2])
    """
    for name, value in (
        ("classes", classes),
        ("per_class", per_class),
        ("features", features),
        ("latent", latent),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, latent))
    y = np.repeat(np.arange(classes), per_class)
    z = centres[y] + noise * rng.normal(size=(len(y), latent))
    projection = rng.normal(size=(latent, features)) / np.sqrt(latent)
    directions = rng.normal(size=(style, features)) / np.sqrt(features)
    X = np.tanh(warp * z @ projection) + style_scale * rng.normal(size=(len(y), style)) @ directions
    X += 0.1 * rng.normal(size=X.shape)
    source = (
        f"synthetic classes (seed {seed}), not a real data set: {classes} classes x "
        f"{per_class} samples, {features} features from a {latent}-d latent space"
    )
    return X, y, source

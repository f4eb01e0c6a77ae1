"""Real data that ships inside a package: scikit-learn's digits (1797 8x8 images), no download."""

from __future__ import annotations

import numpy as np


def digits(*, image: bool = False, test_size: float = 0.25, seed: int = 0):
    """(X_train, X_test, y_train, y_test), stratified; pixels scaled to [0, 1]; NCHW if `image`."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    X = d.data.astype(np.float64) / 16.0
    if image:
        X = X.reshape(-1, 1, 8, 8)
    return train_test_split(X, d.target, test_size=test_size, stratify=d.target, random_state=seed)

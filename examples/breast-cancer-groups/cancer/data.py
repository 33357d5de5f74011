"""The team's data loader, named in params.yaml as `data.loader` with `data.kwargs`.

It returns the samples (`x`), their labels (`y`: 1 malignant, 0 benign, so "positive" means a tumour to catch)
and a `groups` array, the subgroups whose false-positive and false-negative rates the compare report bands.
"""

from __future__ import annotations

import numpy as np


def load(group_feature: str = "mean texture", n_groups: int = 3) -> dict[str, np.ndarray]:
    """Breast cancer samples with groups by quantile of `group_feature` (e.g. `mean texture` low/mid/high)."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    names = list(bunch.feature_names)
    if group_feature not in names:
        raise ValueError(f"data.kwargs.group_feature: unknown feature {group_feature!r}; use one of {names}")
    values = bunch.data[:, names.index(group_feature)]
    edges = np.quantile(values, np.linspace(0, 1, n_groups + 1)[1:-1])
    groups = np.array([f"q{index + 1}" for index in np.searchsorted(edges, values, side="right")])
    x = (bunch.data - bunch.data.mean(axis=0)) / bunch.data.std(axis=0)  # features span 1e-3..1e3: standardise
    return {"x": x.astype("float32"), "y": (1 - bunch.target).astype("int64"), "groups": groups}

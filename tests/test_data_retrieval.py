"""qs.data.retrieval: the seeded synthetic classes of the retrieval experiments."""

import numpy as np
import pytest

from qs.data.retrieval import make_retrieval_classes


def test_synthetic_classes_are_seeded_and_shaped():
    X, y, source = make_retrieval_classes(3, classes=6, per_class=4, features=10)
    again, _, _ = make_retrieval_classes(3, classes=6, per_class=4, features=10)
    assert X.shape == (24, 10) and np.array_equal(y, np.repeat(np.arange(6), 4))
    assert np.array_equal(X, again) and "not a real data set" in source
    assert not np.array_equal(X, make_retrieval_classes(4, classes=6, per_class=4, features=10)[0])
    with pytest.raises(ValueError, match="per_class must be a positive integer; got 0"):
        make_retrieval_classes(0, per_class=0)

"""Top-N JSD against the full-vocabulary JSD it bounds."""

import math

import numpy as np
import pytest

from ragray.generation.divergence import jsd_top_n


def full_jsd(p, q):
    m = (p + q) / 2
    kl = lambda a: float(np.sum(np.where(a > 0, a * np.log(a / m), 0.0)))  # noqa: E731
    return 0.5 * kl(p) + 0.5 * kl(q)


def rows(dist, n):
    top = np.argsort(-dist)[:n]
    return {int(t): math.log(dist[t]) for t in top}


@pytest.mark.parametrize("seed", range(5))
def test_top_n_jsd_is_a_lower_bound_and_exact_with_every_token(seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(30) * 0.3), rng.dirichlet(np.ones(30) * 0.3)
    exact = full_jsd(p, q)
    assert jsd_top_n([rows(p, 30)], [rows(q, 30)]) == pytest.approx(exact, abs=1e-9)
    assert jsd_top_n([rows(p, 5)], [rows(q, 5)]) <= exact + 1e-12


def test_identical_distributions_have_zero_jsd_and_positions_add_up():
    p = {1: math.log(0.7), 2: math.log(0.2)}
    q = {1: math.log(0.1), 2: math.log(0.8)}
    assert jsd_top_n([p], [p]) == 0.0
    assert jsd_top_n([p, q], [q, p]) == pytest.approx(2 * jsd_top_n([p], [q]))

"""Position control: content-driven influence is stable across orders, slot-driven influence is flagged."""

import numpy as np
import pytest

from ragray.metrics.position import control_order, position_analysis


def test_orders():
    assert control_order(4, "reversed", 0, "q") == [3, 2, 1, 0]
    a = control_order(10, "shuffled", 7, "q1")
    assert sorted(a) == list(range(10)) and a != list(range(10))
    assert a == control_order(10, "shuffled", 7, "q1")  # seeded, stable across processes
    assert a != control_order(10, "shuffled", 7, "q2")
    with pytest.raises(ValueError, match="reversed | shuffled"):
        control_order(3, "sideways", 0, "q")


def test_content_driven_influence_is_not_position_driven():
    f = [0.9, 0.0, 0.0, 0.0]
    r = position_analysis(f, f, [3, 2, 1, 0], 0.5)
    assert r.position_sensitivity == 0.0 and not r.position_driven
    assert r.content_influence == pytest.approx(f)


def test_slot_driven_influence_is_position_driven():
    # forward order: the last slot (rank 4) matters; reversed: the last slot holds rank 1
    order = [3, 2, 1, 0]
    f = np.array([0.0, 0.0, 0.2, 0.9])
    c = np.array([0.9, 0.2, 0.0, 0.0])  # per passage, in retrieval order
    r = position_analysis(f, c, order, 0.5)
    assert r.position_sensitivity == pytest.approx(1.0) and r.slot_distance == pytest.approx(0.0)
    assert r.position_driven
    assert r.content_influence == pytest.approx((f + c) / 2)


def test_mixed_and_unmeasured():
    order = [1, 0, 2]
    r = position_analysis([0.6, 0.3, 0.0], [0.3, 0.6, 0.0], order, 0.5)  # half moved: below the threshold
    assert r.position_sensitivity == pytest.approx(0.6 / 1.8) and not r.position_driven
    assert position_analysis([0.0, 0.0], [0.0, 0.0], [1, 0], 0.5) is None
    assert position_analysis([0.5, float("nan")], [0.5, 0.2], [1, 0], 0.5) is None  # < 2 in both orders

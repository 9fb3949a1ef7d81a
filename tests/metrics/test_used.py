"""The "used" rule: hand-checkable influence lists, the demo example of issue 36, config checks."""

import math

import pytest

from ragray.config import InfluenceConfig, load_config
from ragray.errors import ConfigError
from ragray.metrics.used import used_marks

#: SmolLM2-135M in bf16 on the demo set: the gold passage first, beekeeping ones at 0.14 and 0.47
DEMO = [0.99, 0.28, 0.0, 0.39, 0.16, 0.20, 0.14, 0.47, 0.0, 0.0]


def marks(values, rule, threshold, epsilon=0.01):
    return used_marks(values, rule=rule, threshold=threshold, epsilon=epsilon)


def test_the_default_marks_only_the_gold_passage_of_the_demo_question():
    cfg = InfluenceConfig()
    assert (cfg.used_rule, cfg.used_threshold, cfg.epsilon) == ("relative", 0.75, 0.01)
    got = marks(DEMO, cfg.used_rule, cfg.used_threshold, cfg.epsilon)
    assert got == [True] + [False] * 9
    # the old rule (influence > epsilon) marks 7 of these rounded 10 (the report showed 8), both
    # beekeeping passages among them
    assert sum(marks(DEMO, "absolute", 0.01)) == 7 and marks(DEMO, "absolute", 0.01)[6:8] == [True, True]


def test_relative_keeps_every_passage_near_the_largest():
    # 0.75 x 1 = 0.75: 0.75 is kept (>=), 0.74 is not
    assert marks([1.0, 0.75, 0.74, 0.0], "relative", 0.75) == [True, True, False, False]
    assert marks([0.5, 0.4, 0.2], "relative", 0.5) == [True, True, False]
    assert marks([0.2, 0.2], "relative", 0.75) == [True, True]  # ties at the top are both used
    # nothing above epsilon: nothing used, however close to the (tiny) largest
    assert marks([0.01, 0.005, 0.0], "relative", 0.25) == [False, False, False]


def test_absolute_and_outlier_bars():
    assert marks([0.5, 0.3, 0.2], "absolute", 0.3) == [True, False, False]  # strictly above
    # median 0.1, MAD median(|.| - 0.1) = median(0.8, 0, 0.05, 0.1, 0.05) = 0.05: bar 0.1 + 2 x 0.05 = 0.2
    assert marks([0.9, 0.1, 0.15, 0.0, 0.05], "outlier", 2) == [True, False, False, False, False]
    assert marks([0.9, 0.1, 0.15, 0.0, 0.05], "outlier", 0) == [True, False, True, False, False]
    # MAD 0 (all equal): nothing stands out, and at 0 nothing passes epsilon either
    assert marks([0.3, 0.3, 0.3], "outlier", 1) == [False, False, False]


def test_unmeasured_passages_are_none_and_left_out_of_the_question_statistics():
    assert marks([math.nan, 0.4, 0.1], "relative", 0.5) == [None, True, False]
    assert marks([math.nan, math.nan], "relative", 0.75) == [None, None]
    assert marks([], "outlier", 1) == []


def test_an_unknown_rule_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid rules: absolute, relative, outlier"):
        marks([0.5], "median", 1)


def test_config_checks_the_rule_and_its_threshold():
    with pytest.raises(ConfigError, match="used_threshold must be <= 1 with used_rule relative"):
        load_config(None, ["influence.used_threshold=1.5"])
    with pytest.raises(ConfigError, match="used_rule"):
        load_config(None, ["influence.used_rule=top1"])
    cfg = load_config(None, ["influence.used_rule=outlier", "influence.used_threshold=2"])
    assert (cfg.influence.used_rule, cfg.influence.used_threshold) == ("outlier", 2.0)

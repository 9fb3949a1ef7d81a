"""The decline detector, on known replies."""

import math

import pytest

from ragray.generation.prompts import DECLINE_PHRASE
from ragray.metrics.declines import decline_margin, is_decline


@pytest.mark.parametrize("answer", [
    DECLINE_PHRASE, "The passages do not say.", "the passages don't mention the designer",
    "I don't know.", "I do not know", "Unknown", "It cannot be determined from the passages.",
    "The text does not specify the price.", "There is no information about that.",
    "The price is not mentioned in the passages.", "Not stated in the context", "Unanswerable.",
    "N/A", "None", "The context does not provide this information", "I can't answer that",
    "Not enough information to answer.", "The designer is not known.",
])
def test_declines_are_detected(answer):
    assert is_decline(answer)


@pytest.mark.parametrize("answer", [
    "14 October 1871", "Elias Morrow", "Notre Dame", "The Unknown Soldier", "no", "None of the above bands, but Oasis",
    "It does not rain there in July", "Not far from Kell", "", None, "Knowledge is power",
    "The passages say 1871", "240 passengers",
])
def test_answers_are_not_declines(answer):
    assert not is_decline(answer)


def test_decline_margin_is_the_per_token_difference():
    assert decline_margin(-6.0, 6, -10.0, 5) == pytest.approx(-1.0 + 2.0)
    assert decline_margin(None, 6, -1.0, 1) is None
    assert decline_margin(math.nan, 6, -1.0, 1) is None
    assert decline_margin(-1.0, 0, -1.0, 1) is None

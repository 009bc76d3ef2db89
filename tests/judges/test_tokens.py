"""judges/tokens.py: what the tokenizer says about numbers (cost planning of expected marks)."""
from __future__ import annotations

import pytest

from judges.tokens import splits_numbers
from infra.models import default_tokenizer


def test_smollm2_spells_a_two_digit_mark_in_digit_tokens():
    source = default_tokenizer("smollm2-135m-instruct")
    if source is None:
        pytest.skip("the CPU model is not prepared here (bash infra/local/install.sh prepares it)")
    assert splits_numbers(source) is True


def test_no_tokenizer_is_unknown_not_a_guess(tmp_path):
    assert splits_numbers(None) is None
    assert splits_numbers(str(tmp_path / "no-such-tokenizer")) is None

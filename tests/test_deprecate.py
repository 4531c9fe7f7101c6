"""The one-release shims for the old progress keywords (``quiet=``, ``progress=``) → ``show_progress``."""

from __future__ import annotations

import warnings

import pytest

from aflite._deprecate import progress_flag
from aflite.errors import ParameterError
from aflite.experiments.synthetic import run_synthetic


def test_progress_flag_maps_old_keywords_with_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keyword alone warns about nothing
        assert progress_flag(True) is True and progress_flag(False) is False
    with pytest.warns(DeprecationWarning, match="quiet= is deprecated"):
        assert progress_flag(True, quiet=True) is False
    with pytest.warns(DeprecationWarning, match="quiet= is deprecated"):
        assert progress_flag(False, quiet=False) is True
    with pytest.warns(DeprecationWarning, match="progress= is deprecated"):
        assert progress_flag(True, progress=False) is False


def test_public_function_still_takes_the_old_keyword() -> None:
    with pytest.warns(DeprecationWarning, match="run_synthetic: progress="), pytest.raises(ParameterError):
        run_synthetic(seeds=[], progress=False)

"""The audit's checks (aflite.audit.checks): registered once beside explain's, in the one shape, each with its
per-row values and its own keys of a view's entry in results.json; a check of one scope is refused the other's
data."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from test_audit import SMALL, _pairs

from aflite import audit as A
from aflite import check
from aflite.audit import checks as audit_checks
from aflite.audit.check_summaries import TraSummary
from aflite.audit.images import audit_image_dataset
from aflite.check import Check, CheckData, CheckResult, CheckSummary
from aflite.errors import ParameterError
from aflite.explain import checks as explain_checks


def _defined(module: Any) -> tuple[str, ...]:
    """The checks a module defines, in the order it defines them."""
    return tuple(c.name for c in vars(module).values() if isinstance(c, type) and issubclass(c, Check) and c.name
                 and c.__module__ == module.__name__)


BUILT_IN = _defined(audit_checks)


def test_one_registry_two_scopes() -> None:
    """Each built-in check is registered where it is defined (no list to keep beside it), in that order."""
    for scope, module in (("audit", audit_checks), ("explain", explain_checks)):
        names = check.check_names(scope)  # a module's checks, in the order it defines them (others may follow)
        assert [n for n in names if n in _defined(module)] == list(_defined(module)), scope
        assert all(check._check_class(n) is getattr(module, type(check.get_check(n)).__name__)
                   for n in _defined(module))
    assert set(check.check_names()) == set(check.check_names("explain") + check.check_names("audit"))
    with pytest.raises(ParameterError, match="unknown check scope"):
        check.check_names("evaluate")

    class Odd(Check):
        name: ClassVar[str] = "odd"
        scope: ClassVar[str] = "evaluate"

    with pytest.raises(ParameterError, match="scope must be one of explain, audit"):
        check.register(Odd)
    assert "odd" not in check.CHECKS


def test_each_check_owns_its_keys_and_its_rows(tmp_path: Path) -> None:
    ds = _pairs()
    res = A.audit(ds, cache_dir=str(tmp_path), **SMALL)
    for view in ("hypothesis", "premise"):
        va = res.views[view]
        assert tuple(va.checks) == check.check_names("audit")
        keys = [k for r in va.checks.values() for k in r.summary.to_json(common=False)]
        assert len(keys) == len(set(keys))  # no key written by two checks
        assert ["view", "condition", *keys] == list(va.to_dict())  # flat: the checks' own fields, no common keys
        tra = va.checks["tra"].summary
        assert va.checks["tra"].seconds is None and isinstance(tra, TraSummary) and tra.tra is None  # disabled
        assert tra.to_json(common=False) == {"tra": None, "tra_details": None, "finetuned": {}}  # its keys kept
        rows = res.row_scores(view)
        np.testing.assert_array_equal(va.checks["biased_model"].flags, rows["biased_correct"])
        np.testing.assert_array_equal(va.checks["leakage_metrics"].flags, rows["biased_pred"] == rows["normal_pred"])
        np.testing.assert_array_equal(va.checks["peco"].scores, rows["cluster_divergence"])
        np.testing.assert_array_equal(va.checks["peco"].flags, rows["biased_region"])
        assert va.checks["biased_model"].summary.score == va.metrics.biased_accuracy
        assert va.checks["leakage_metrics"].summary.score == va.metrics.delta_maj
        assert va.checks["peco"].summary.score == va.peco.score
        assert va.to_dict()["token_artifacts"] == va.artifacts and va.artifacts
        for name, r in va.checks.items():  # every summary in the one shape; flagged counted from the flags
            assert type(r.summary) is not CheckSummary and isinstance(r.summary, CheckSummary), name
            assert r.summary.flagged == (None if r.flags is None else int(r.flags.sum())), name
            assert r.summary.verdict == [], name  # the built-in ones have none: audit_verdict reconciles them
            assert type(r.summary).from_json(r.summary.to_json()) == r.summary, name
    assert {"biased_models", "peco", "tsne", "artifacts"} <= set(res.timings) and "tra" not in res.timings


def test_an_image_audit_runs_the_same_checks_without_text(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(["a", "b"], 20)
    cfg = A.AuditConfig(**{**SMALL, "featurizer": "precomputed"})  # type: ignore[arg-type]
    res = audit_image_dataset([f"i{k}.png" for k in range(40)], y, rng.normal(size=(40, 6)), cfg,
                              colour=np.c_[(y == "a") * 1.0, rng.random(40)])
    va = res.views["colour"]
    assert tuple(va.checks) == check.check_names("audit")
    assert va.checks["token_artifacts"].seconds is None and va.artifacts == {}  # reads text: disabled
    assert va.metrics.biased_accuracy == 1.0  # the colour cue gives the label away


def test_a_run_check_is_refused_a_dataset_without_a_run() -> None:
    class NeedsRun(Check):
        name: ClassVar[str] = "needs_run"

        def find(self, data: CheckData) -> CheckResult:
            return CheckResult(self.name, flags=~data.kept())

    data = CheckData(np.array(["r0", "r1"]), np.array(["a", "b"]), np.array(["a", "b"]), np.array([0, 1]),
                     np.zeros((2, 1)), 0)
    with pytest.raises(ParameterError, match="reads a run"):
        NeedsRun().find(data)

"""The shared autopatch runtime's config reading (no GPU needed; runs wherever torch imports)."""
from types import SimpleNamespace

import pytest

pytest.importorskip("torch", reason="the autopatch runtime imports torch")
from liger_kernels.transformers._autopatch import _logit_softcap  # noqa: E402


class _MultimodalConfig(SimpleNamespace):
    """A multimodal head's config: the soft-cap lives on its text config only (Gemma4Config)."""

    def get_text_config(self):
        return self.text_config


def test_softcap_is_read_from_the_text_config_of_a_multimodal_head():
    cfg = _MultimodalConfig(text_config=SimpleNamespace(final_logit_softcapping=30.0))
    assert _logit_softcap(cfg, "final_logit_softcapping") == 30.0


def test_softcap_of_a_text_model_and_an_absent_cap():
    assert _logit_softcap(SimpleNamespace(final_logit_softcapping=15.0), "final_logit_softcapping") == 15.0
    assert _logit_softcap(SimpleNamespace(), "final_logit_softcapping") is None
    assert _logit_softcap(_MultimodalConfig(text_config=SimpleNamespace()), "final_logit_softcapping") is None

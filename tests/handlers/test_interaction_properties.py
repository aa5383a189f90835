"""Property tests of what Slack echoes back in modals and interactions: the scale form's private
metadata, a modal's state values, an interaction's identity. None may raise, whatever arrives."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.render.scale_modal import ScaleForm
from handlers.context import interaction_of
from handlers.views import _amount, _selected
from tests.support.mutations import objects


@given(st.text(max_size=300))
def test_private_metadata_is_a_form_or_nothing(text: str) -> None:
    form = ScaleForm.load(text)
    assert form is None or isinstance(form, ScaleForm)


@given(objects)
def test_modal_state_values_never_break_the_submission(values: dict[str, Any]) -> None:
    amount = _amount(values)
    assert amount is None or 0 <= amount < 10**6
    assert isinstance(_selected(values, "runner_type"), str)


@given(objects)
def test_any_interaction_has_an_identity_or_none(body: dict[str, Any]) -> None:
    identity = interaction_of(body)
    assert identity is None or isinstance(identity, str)


@given(objects)
def test_a_form_another_release_opened_keeps_what_this_one_knows(extra: dict[str, Any]) -> None:
    """During a rollout or a rollback a form opened on one release is submitted to the other:
    a field this release does not know is left out, never the form."""
    form = ScaleForm("1", "C1", "linux.2xlarge", 7, raise_maximum=True, advised=7)
    data = {**{f"later_{k}": v for k, v in extra.items()}, **json.loads(form.dump())}
    assert ScaleForm.load(json.dumps(data)) == form

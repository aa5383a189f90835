"""Models stored under short keys are read under either name (`stored_short`): a short key that
is another field's name, or two fields under one key, would read one field's value into the
other after a round trip through Redis."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from pydantic import BaseModel

import bot.domain
from bot.domain.reading.judgement import Judgement


def stored_models() -> list[type[BaseModel]]:
    found = []
    for info in pkgutil.walk_packages(bot.domain.__path__, "bot.domain."):
        module = importlib.import_module(info.name)
        for model in vars(module).values():
            if (
                inspect.isclass(model)
                and issubclass(model, BaseModel)
                and model.__module__ == info.name
                and model.model_config.get("alias_generator") is not None
            ):
                found.append(model)
    return found


@pytest.mark.parametrize("model", stored_models(), ids=lambda m: m.__name__)
def test_no_short_key_is_another_fields_name_or_shared(model: type[BaseModel]) -> None:
    keys = {name: field.serialization_alias or name for name, field in model.model_fields.items()}
    for name, key in keys.items():
        assert key == name or key not in keys, f"{model.__name__}.{name} stored as {key!r}"
    assert len(set(keys.values())) == len(keys), keys


def test_the_judgements_every_field_survives_a_round_trip() -> None:
    """Each field set to a value of its own: read back, each has its own."""
    values = {"cannot_start": 3, "held": 2, "unplaced": 1, "nodes_short": 4, "booting": 5}
    j = Judgement.model_validate({"at": "2026-11-26T12:00:00Z", **values})
    again = Judgement.model_validate_json(j.model_dump_json(by_alias=True))
    assert again == j
    assert (again.cannot_start, again.held, again.unplaced, again.nodes_short) == (3, 2, 1, 4)

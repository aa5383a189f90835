"""The settings' reference and the example file say what the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import Settings, known_variables
from bot.config.reference import render
from bot.config.settings import Advanced

ROOT = Path(__file__).parents[2]


def test_the_configuration_reference_is_generated_from_the_settings_model() -> None:
    written = (ROOT / "docs" / "configuration.md").read_text()
    assert written == render(), (
        "docs/configuration.md is stale: run "
        "`.venv/bin/python -m bot.config.reference > docs/configuration.md`"
    )


def test_the_reference_documents_every_setting_once() -> None:
    rows = re.findall(r"^\| \**`([A-Z0-9_]+)`\** \|", render(), re.M)
    assert sorted(rows) == sorted(known_variables())


def test_every_setting_says_what_it_does() -> None:
    assert [n for n, f in Settings.model_fields.items() if len(f.description or "") < 12] == []


def test_env_example_sets_only_known_settings_and_no_advanced_ones() -> None:
    names = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M)
    advanced = {name.upper() for name in Advanced.model_fields}
    assert names
    assert set(names) <= known_variables()
    assert not set(names) & advanced

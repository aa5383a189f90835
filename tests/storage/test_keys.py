"""The Redis layout by name: a 0.25 replica reads the same keys during a rolling upgrade, so a
key is built from exactly its IDs, and a few of them are spelt out here as that release spells
them."""

from __future__ import annotations

import pytest

from bot.storage.keys import Keys

KEYS = Keys("qp")


def test_keys_are_named_as_the_previous_release_names_them() -> None:
    assert KEYS.stream == "qp:notifications"
    assert KEYS.incident("7") == "qp:v2:incident:7"
    assert KEYS.message("C1", "17.5") == "qp:v2:message:C1:17.5"
    assert KEYS.posts("C1") == "qp:v2:send:C1:posts"
    assert KEYS.action_lock("7", "silence") == "qp:v2:action-lock:7:silence"


@pytest.mark.parametrize("ids", [(), ("7", "8")])
def test_a_key_of_the_wrong_number_of_ids_is_refused(ids: tuple[str, ...]) -> None:
    with pytest.raises(TypeError):
        KEYS.incident(*ids)

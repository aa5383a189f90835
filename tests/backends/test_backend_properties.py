"""Property tests for the backends' parsers of outside input: answers of silence and scale
backends, the numbers and text any backend quotes, kubeconfig files, and the scale webhook's
signature. None may raise anything but its one documented error, whatever arrives. What Slack
echoes back in modals and interactions: tests/handlers/test_interaction_properties.py."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.backends.http import BackendError, error_of, number_of, shortened
from bot.backends.kube import kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import _capacity
from bot.backends.scale.webhook import sign, verify, webhook_result
from bot.backends.silence import silence_state
from bot.config import SettingsError
from bot.domain.scale.scaling import ScaleTarget
from tests.support.mutations import json_values, mutated, objects

REQUEST = ScaleRequest(ScaleTarget("t", "x", cap=5), 2, "1", "al")


@given(objects)
def test_a_silence_answer_is_a_state_or_a_backend_error(data: dict[str, Any]) -> None:
    try:
        state = silence_state("id", data, "Alertmanager")
    except BackendError:
        return
    assert isinstance(state.state, str)


@given(st.builds(dict, status=st.fixed_dictionaries({"state": st.text()}), endsAt=json_values))
def test_a_silence_with_a_state_is_read_whatever_its_end(data: dict[str, Any]) -> None:
    assert silence_state("id", data, "Grafana").state == data["status"]["state"]


@given(json_values)
def test_a_webhook_answer_never_breaks_the_result(data: object) -> None:
    result = webhook_result(REQUEST, data)
    assert result.detail


@given(objects)
def test_any_scale_set_object_gives_a_capacity(data: dict[str, Any]) -> None:
    capacity = _capacity(data)
    assert capacity.minimum is None or capacity.minimum >= 0


@given(st.one_of(json_values, st.text(), st.integers(), st.floats()))
def test_a_number_a_backend_quotes_is_read_as_that_number_or_not_at_all(value: object) -> None:
    number = number_of(value)
    if number is not None:
        assert not isinstance(value, bool) and number == float(value)  # type: ignore[arg-type]
        assert math.isfinite(number)


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**63), 2**63))
def test_a_finite_number_is_read_whether_sent_as_a_number_or_quoted(value: float) -> None:
    assert number_of(value) == float(value)
    assert number_of(repr(value)) == float(value)
    assert number_of(f" {value}\n") == float(value), "as a header's value may be padded"


@given(st.sampled_from(["inf", "+Inf", "-Infinity", "nan", "1e999", math.inf, -math.inf, 10**400]))
def test_an_endless_number_is_none(value: object) -> None:
    assert number_of(value) is None


@given(st.text(), st.integers(2, 400))
def test_a_backends_text_is_said_on_one_line_within_its_limit(text: str, limit: int) -> None:
    said = shortened(text, limit)
    assert len(said) <= limit and "\n" not in said and said == said.strip()
    assert said == " ".join(text.split()) or said.endswith("…")


@given(st.integers(100, 599), st.binary(max_size=600))
def test_any_refusal_is_told_short(status: int, body: bytes) -> None:
    error = error_of("Grafana", httpx.Response(status, content=body))
    assert str(error).startswith(f"Grafana answered {status}")
    assert len(str(error)) <= 250
    assert error.retryable is (status >= 500 or status == 429)


# A kubeconfig kubectl takes: a token user, and one signing in through an exec plugin.
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "plugin",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "contexts": [
        {"name": "plugin", "context": {"cluster": "c", "user": "p"}},
        {"name": "token", "context": {"cluster": "c", "user": "t"}},
    ],
    "users": [
        {"name": "t", "user": {"token": "abc"}},
        {
            "name": "p",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": sys.executable,
                    "args": ["-c", "print()"],
                    "env": [{"name": "A", "value": "b"}],
                    "interactiveMode": "Never",
                    "installHint": "install python",
                }
            },
        },
    ],
}


def _plugin_user(name: object, **exec_section: object) -> str:
    plugin = KUBECONFIG["users"][1]["user"]["exec"] | exec_section
    users = [KUBECONFIG["users"][0], {"name": name, "user": {"exec": plugin}}]
    return json.dumps(KUBECONFIG | {"users": users})


@settings(max_examples=120, deadline=None)
@example(_plugin_user("p", env=True))  # an env that is no list
@example(_plugin_user([]))  # a user named by no string
@given(
    st.text(max_size=400)
    | st.builds(json.dumps, json_values)
    | st.builds(json.dumps, mutated(KUBECONFIG))
)
def test_any_kubeconfig_is_access_or_a_clear_error(text: str) -> None:
    with TemporaryDirectory() as directory:
        path = Path(directory) / "kubeconfig"
        path.write_text(text)
        try:
            access = kube_access(str(path), {})
        except SettingsError as exc:
            said = str(exc)
            assert said.startswith(
                f"SCALER_BACKEND=arc: no Kubernetes access through SCALER_KUBECONFIG: kubeconfig "
                f"{path}"
            )
            assert said.endswith("Fix it, or point SCALER_KUBECONFIG at another")
            return
        assert access.server.startswith(("http://", "https://"))


@given(st.binary(max_size=200), st.integers(0, 2**31), st.text(max_size=30))
def test_a_signature_verifies_only_its_own_body_and_time(
    body: bytes, stamp: int, secret: str
) -> None:
    headers = {
        "X-Queuepilot-Timestamp": str(stamp),
        "X-Queuepilot-Signature": sign(secret, stamp, body),
    }
    assert verify(secret, headers, body, now=stamp) is None
    assert verify(secret, headers, body + b"x", now=stamp) == "signature mismatch"
    assert verify(secret, headers, body, now=stamp + 301) == "timestamp outside the replay window"


def test_signature_of_a_known_body() -> None:
    # What a receiver in another language must compute, byte for byte.
    expected = hmac.new(b"secret", b'1763800000:{"delta":2}', hashlib.sha256).hexdigest()
    assert sign("secret", 1763800000, b'{"delta":2}') == expected

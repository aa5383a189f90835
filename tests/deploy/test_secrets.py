"""The bot's secrets, each of the chart's three ways: a Secret the operator made, one the chart
makes from values, one the External Secrets Operator makes; read as environment variables or as
files of the mounted Secret. What the pods read is what the bot's settings take."""

from __future__ import annotations

import base64
from pathlib import Path

import helm_python
import pytest
import yaml

from bot.config import known_variables as settings_variables
from bot.config import read_settings
from bot.config.loading import secret_settings
from tests.deploy.manifests import (
    CASES,
    SECRET,
    SECRET_EXAMPLES,
    SECRET_FILES,
    SLACK_SECRETS,
    chart_env,
    config,
    container,
    env_file_keys,
    known_variables,
    one,
    pod_spec,
    render,
    render_values,
    settings_config_map,
)


def released(objects: list[dict]) -> list[dict]:
    """What the release keeps: not the hooks' objects."""
    return [o for o in objects if "helm.sh/hook" not in o["metadata"].get("annotations", {})]


def secret_read(objects: list[dict]) -> list[str]:
    """The names of the Secrets the pod reads, as variables or as files."""
    main, volumes = container(objects), pod_spec(objects)["volumes"]
    read = [source["secretRef"]["name"] for source in main["envFrom"] if "secretRef" in source]
    return read + [volume["secret"]["secretName"] for volume in volumes if "secret" in volume]


@pytest.mark.parametrize("case", CASES)
def test_the_pods_read_one_secret_and_it_is_the_one_the_chart_names(case: str) -> None:
    objects = render(case)
    values = CASES[case][0]
    # The upgrade check's copy of a chart-made Secret is a hook's, gone once the check passed.
    made = [o for o in released(objects) if o["kind"] in ("Secret", "ExternalSecret")]
    if "existingSecret" in values:
        assert made == []  # the operator's: the chart makes none, and never sees the tokens
        assert secret_read(objects) == [values["existingSecret"]]
    else:
        (maker,) = made
        target = maker["metadata"]["name"]
        if maker["kind"] == "ExternalSecret":
            target = maker["spec"]["target"]["name"]
        assert secret_read(objects) == [target]


def test_secrets_given_as_values_become_the_secret_the_pods_read() -> None:
    objects = render("secrets-in-values")
    secret = one(released(objects), "Secret")
    assert secret["type"] == "Opaque"
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert data == CASES["secrets-in-values"][0]["secrets"]
    # Never in the ConfigMap, nor anywhere else in the manifests but the Secret.
    text = yaml.safe_dump([o for o in objects if o["kind"] != "Secret"])
    assert not [value for value in data.values() if value in text]


def test_the_chart_refuses_exactly_the_secret_settings_in_config() -> None:
    """Every secret setting of the code (REDIS_URL aside: without a password it is plain
    configuration) is refused in the ConfigMap; every other setting is taken."""
    secrets = {name.upper() for name in secret_settings()} - {"REDIS_URL"}
    for name in sorted(secrets):
        with pytest.raises(helm_python.HelmError, match=f"config.{name} is a secret"):
            render_values({**SECRET, "config": {name: "x"}})
    # ARC's namespace is arc.namespace's, the webhook's limits webhooks.github's, each set once
    # (test_chart.py).
    from_values = {"SCALER_ARC_NAMESPACE", "GITHUB_WEBHOOK_RATE", "GITHUB_WEBHOOK_CONCURRENCY"}
    others = set(settings_variables()) - secrets - from_values
    objects = render_values({**SECRET, "config": dict.fromkeys(others, "1")})
    assert others <= set(config(objects))


@pytest.mark.parametrize("case", ["external-secret", "ci-bots"])
def test_the_external_secret_makes_the_secret_the_pods_read(case: str) -> None:
    objects = render(case)
    external = one(objects, "ExternalSecret")
    assert external["metadata"]["namespace"] == one(objects, "Deployment")["metadata"]["namespace"]
    assert secret_read(objects) == [external["spec"]["target"]["name"]]
    # Owned: uninstalling the release deletes the Secret the ExternalSecret made.
    assert external["spec"]["target"]["creationPolicy"] == "Owner"
    values = CASES[case][0]["externalSecret"]
    assert external["spec"]["secretStoreRef"] == {
        "kind": values["secretStoreRef"].get("kind", "ClusterSecretStore"),
        "name": values["secretStoreRef"]["name"],
    }
    key = values.get("remoteKey", "queuepilot")
    assert external["spec"]["dataFrom"] == [{"extract": {"key": key}}]
    assert external["spec"]["refreshInterval"] == "1h"


@pytest.mark.parametrize("case", SECRET_FILES)
def test_secret_files_read_each_required_secret_from_the_mounted_secret(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every <NAME>_FILE the pod sets names a key of the mounted Secret, and those keys are the
    ones the mode's secret.env.example asks for; with those files, `serve` starts."""
    objects = render(case)
    main, pod = container(objects), pod_spec(objects)
    assert main["envFrom"] == [
        {"configMapRef": {"name": settings_config_map(objects)["metadata"]["name"]}}
    ]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "queuepilot"
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    # Readable by the bot's user through its group, and by nobody else.
    assert volume["secret"]["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]

    env = chart_env(objects, case)
    files = {e["name"]: e["value"] for e in env if e["name"].endswith("_FILE")}
    assert set(files) == {e["name"] for e in env} - {"MEMORY_LIMIT_MIB"}
    keys = {name.removesuffix("_FILE"): path for name, path in files.items()}
    for key, path in keys.items():
        assert path == f"{mount['mountPath']}/{key}"
    mode = SECRET_FILES[case]
    assert set(keys) == set(env_file_keys(SECRET_EXAMPLES[mode], commented=False))

    for name in known_variables():
        monkeypatch.delenv(name, raising=False)
    values = {"SLACK_BOT_TOKEN": "xoxb-0000-example", "SLACK_APP_TOKEN": "xapp-1-example"}
    for key in keys:
        (tmp_path / key).write_text(values.get(key, "example") + "\n")
        monkeypatch.setenv(f"{key}_FILE", str(tmp_path / key))
    settings = read_settings(_env_file=None, **{k.lower(): v for k, v in config(objects).items()})
    assert settings.socket_mode is (mode == "socket")
    assert settings.slack_bot_token.get_secret_value() == "xoxb-0000-example"


def test_secret_files_of_secrets_given_as_values_cover_every_key() -> None:
    """The chart sees those keys: a GitHub App's key given with the rest is read from its file."""
    secrets = {**SLACK_SECRETS, "GITHUB_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\n…"}
    objects = render_values({"secrets": secrets, "secretFiles": True})
    names = [e["name"] for e in container(objects)["env"]]
    assert names == ["MEMORY_LIMIT_MIB", *sorted(f"{key}_FILE" for key in secrets)]
    assert set(names) <= known_variables()

"""`queuepilot check` and `--version` run as an operator runs them: a process with an environment,
against the Slack emulator and real redis-servers; what it prints and how it exits."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

from bot.backends.metrics.promql import defaults
from bot.domain.reading.runner_pods import NEEDS
from sandbox.slack_methods import ALL_SCOPES
from tests.checks.conftest import check_env, lines, run_check
from tests.support.processes import REPO
from tests.support.servers import free_port
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack


def test_version_is_the_packages_and_a_development_one_names_its_commit(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    installed = version("queuepilot")
    assert ".dev" in installed, "main carries a development version between releases"
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()

    result = run_check(check_env(slack, redis_url), tmp_path, "--version")

    assert result.returncode == 0
    # Run from the checkout, as an editable install is: a built package's commit is recorded at
    # build time (tests/deploy/test_version.py).
    assert result.stdout.strip() == f"queuepilot {installed}+g{head[:12]}", "the checkout's HEAD"


def test_settings_problems_are_all_printed_and_nothing_is_probed(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    env = check_env(slack, redis_url, METRIC_BACKEND="prometheus", SILENCE_BACKEND="grafana")
    del env["SLACK_CHANNEL"]

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    failed = lines(result, "FAIL")
    assert failed == lines(result), "settings problems only: nothing was probed"
    assert all(line.split()[1] == "settings" for line in failed)
    said = "\n".join(failed)
    assert "METRIC_BACKEND is not a queuepilot setting: did you mean METRICS_BACKEND?" in said
    assert "SLACK_CHANNEL is required" in said
    assert "SILENCE_BACKEND=grafana needs" in said or "GRAFANA_URL" in said
    assert slack.emulator.calls() == [], "Slack was not called"
    assert result.stdout.splitlines()[-1] == "queuepilot check: 0 ok, 0 warnings, 3 failed"


def test_a_near_miss_alone_fails_but_every_dependency_is_still_probed(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    # What EKS injects (AWS_DEFAULT_REGION, …) and Kubernetes' service links are no typos.
    env = check_env(
        slack,
        redis_url,
        SLACK_CHANEL="C0QUEUE",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL_SQS="https://sqs.us-east-1.amazonaws.com",
        AWS_ROLE_ARN="arn:aws:iam::123456789012:role/queuepilot",
        KUBERNETES_SERVICE_HOST="10.0.0.1",
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    assert lines(result, "FAIL") == [
        "FAIL  settings   SLACK_CHANEL is not a queuepilot setting: did you mean SLACK_CHANNEL?"
    ]
    probed = {line.split()[1] for line in lines(result, "ok")}
    assert {"slack", "redis"} <= probed, result.stdout


def test_redis_without_persistence_is_a_warning_and_exits_0(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    """The suite's Redis keeps nothing (`--save "" --appendonly no`)."""
    result = run_check(check_env(slack, redis_url), tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    [warning] = lines(result, "warn")
    assert warning.split()[1] == "redis"
    assert "no persistence" in warning and "a restart loses accepted notifications" in warning
    assert "fix: turn on AOF (appendonly yes)" in warning
    assert lines(result, "FAIL") == []
    assert "ok    slack      auth.test: @queuepilot (U0QUEUEBOT) in queuepilot-sandbox" in (
        result.stdout
    )


def test_a_scope_slack_did_not_grant_fails_naming_it_and_the_feature(
    tmp_path: Path, slack: Slack, persistent_redis: str
) -> None:
    slack.emulator.scopes = ALL_SCOPES - {"files:write", "users:read"}
    env = check_env(slack, persistent_redis)

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    failed = lines(result, "FAIL")
    assert len(failed) == 2, result.stdout
    files, names = sorted(failed)
    assert "scope files:write missing: postmortems shared into the thread" in files
    assert "scope users:read missing: people's names" in names
    assert "fix: add users:read under OAuth & Permissions" in names
    assert "reinstall the app" in names


def test_a_channel_the_app_is_not_in_fails_with_the_invite(
    tmp_path: Path, slack: Slack, persistent_redis: str
) -> None:
    slack.emulator.add_channel("C0CHECKOUT", member=False)
    routes = json.dumps([{"match": ["team=rocm"], "channel": "C0CHECKOUT"}])

    result = run_check(check_env(slack, persistent_redis, SLACK_ROUTES=routes), tmp_path)

    assert result.returncode == 1
    [failed] = lines(result, "FAIL")
    assert "(C0CHECKOUT) [route 1: team='rocm']: the app is not in it" in failed
    assert "fix: invite it there (/invite @queuepilot)" in failed
    assert any("(C0QUEUE) [SLACK_CHANNEL]" in line for line in lines(result, "ok"))


def test_secrets_stay_out_of_the_report(tmp_path: Path, slack: Slack) -> None:
    """A password in REDIS_URL, and a refused bot token, are never printed."""
    env = check_env(slack, f"redis://:s3cret-pass@127.0.0.1:{free_port()}/0")
    env["SLACK_BOT_TOKEN"] = "xoxb-not-the-workspaces-token"

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    assert "s3cret-pass" not in result.stdout + result.stderr
    assert "xoxb-not-the-workspaces-token" not in result.stdout + result.stderr
    failed = "\n".join(lines(result, "FAIL"))
    assert "auth.test refused SLACK_BOT_TOKEN: invalid_auth" in failed
    assert "unreachable at 127.0.0.1:" in failed


def test_check_shows_each_query_as_asked_with_the_selector_in_every_series(
    tmp_path: Path, slack: Slack, redis_url: str, empty_prometheus: str
) -> None:
    env = check_env(
        slack,
        redis_url,
        METRICS_BACKEND="prometheus",
        PROMETHEUS_URL=empty_prometheus,
        PROMETHEUS_SELECTOR="{cluster = 'prod'}",
        PROMETHEUS_QUERIES=json.dumps({"busy": "sum by (name) (pool_busy)", "idle": ""}),
    )

    result = run_check(env, tmp_path)

    said = [
        line.split(None, 2)[2] for line in lines(result, "ok") if line.split()[1] == "prometheus"
    ]
    asked = [line for line in said if line.startswith("query ")]
    assert said[said.index(asked[0]) - 1] == (
        'PROMETHEUS_SELECTOR cluster="prod": in every series of the default queries; '
        "PROMETHEUS_QUERIES' own (busy) as written"
    )
    assert asked[0] == (
        'query queued: (max by (name) (gha_assigned_jobs{cluster="prod"}) - '
        'max by (name) (gha_running_jobs{cluster="prod"}))'
    )
    assert "query busy (PROMETHEUS_QUERIES): sum by (name) (pool_busy)" in asked
    assert not any(line.startswith("query idle") for line in asked), "a field dropped is not asked"
    assert asked[-1] == (
        'query runner pods: 16 default readings, every series with cluster="prod" '
        "(docs/backends.md)"
    )
    fields = [line.split(":")[0].split()[1] for line in asked[:-1]]
    arc = [field for field in defaults() if field not in NEEDS]
    assert len(fields) == len(set(fields)) == len(arc) - 1  # less the one dropped
    assert all(
        '{cluster="prod"}' in line for line in asked[:-1] if "PROMETHEUS_QUERIES" not in line
    )


def test_a_route_typo_and_values_an_env_file_left_in_quotes_are_warned_and_check_passes(
    tmp_path: Path, slack: Slack, persistent_redis: str
) -> None:
    """`team==rocm` means team equal to "=rocm" to Alertmanager and to queuepilot alike, and
    passes; `docker --env-file` keeps `KEY="value"`'s quotes in the value."""
    routes = json.dumps([{"match": ["team==rocm"], "channel": CHANNEL}])
    env = check_env(
        slack,
        persistent_redis,
        SLACK_ROUTES=routes,
        REDIS_SENTINEL_MASTER='"mymaster"',
        SLACK_SIGNING_SECRET=f"'{SIGNING_SECRET}'",
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 0, result.stdout
    quotes = "remove the quotes (env files keep them: docker's --env-file and kubectl's "
    quotes += "--from-env-file pass them on as part of the value)"
    assert lines(result, "warn") == [
        f"warn  settings   REDIS_SENTINEL_MASTER: {quotes}",
        f"warn  settings   SLACK_SIGNING_SECRET: {quotes}",
        'warn  settings   SLACK_ROUTES route 1: team==rocm: the value is "=rocm"; did you mean '
        'team="rocm"?',
    ]
    assert "and 1 route" in lines(result, "ok")[0]
    assert SIGNING_SECRET not in result.stdout


def test_a_value_refused_for_its_quotes_says_so_once_and_never_shows_a_secret(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    env = check_env(
        slack,
        redis_url,
        SLACK_BOT_TOKEN=f'"{BOT_TOKEN}"',
        METRICS_BACKEND="prometheus",
        PROMETHEUS_URL='"http://prometheus.monitoring:9090"',
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    quotes = "; its value is in quotes: remove the quotes (env files keep them"
    token, url = lines(result, "FAIL")
    assert token.startswith("FAIL  settings   SLACK_BOT_TOKEN: not a bot token (xoxb-…)" + quotes)
    assert url.startswith(
        "FAIL  settings   PROMETHEUS_URL: '\"http://prometheus.monitoring:9090\"' is not a URL"
    )
    assert quotes in url
    assert lines(result, "warn") == [], "the problem says it: no warning beside it"
    assert BOT_TOKEN not in result.stdout

"""What `check` flags in the scaling settings before any backend is asked, and `check --format
json`, the document CI reads: run as an operator runs them, against the Slack emulator and a real
redis-server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.checks.conftest import check_env, lines, run_check
from tests.support.slack import Slack

WEBHOOK = {
    "SCALER_BACKEND": "webhook",
    "SCALER_WEBHOOK_URL": "http://127.0.0.1:9/scale",
    "SCALER_WEBHOOK_SECRET": "a-webhook-secret",
}


def test_a_scaler_nobody_may_use_and_a_cap_above_the_ceiling_fail_naming_the_settings(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    targets = {
        "linux.big": {"target": "big", "cap": 10, "ceiling": 5},
        "linux.small": {"target": "small", "ceiling": 4},
    }
    env = check_env(slack, redis_url, **WEBHOOK, SCALER_TARGETS=json.dumps(targets))

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    assert lines(result, "FAIL") == [
        "FAIL  scaling    SCALER_BACKEND is webhook but SCALE_ALLOWED_USERS is empty: nobody can "
        "scale (every Scale up is refused) — fix: set SCALE_ALLOWED_USERS to the Slack member IDs "
        "(U…) or user-group IDs (S…) who may scale, comma-separated, e.g. "
        "SCALE_ALLOWED_USERS=S0123456789 for the on-call group",
        "FAIL  scaling    linux.big: its cap, the most one request may add, is 10, above its "
        "ceiling of 5: a request for the cap is always refused — fix: set "
        'SCALER_TARGETS["linux.big"] "cap" to at most 5, or raise its "ceiling"',
        "FAIL  scaling    linux.small: SCALE_DEFAULT_CAP (10), the most one request may add, is "
        "10, above its ceiling of 4: a request for the cap is always refused — fix: set "
        'SCALER_TARGETS["linux.small"] "cap" to at most 4, or raise its "ceiling"',
    ]


def test_an_arc_target_without_a_ceiling_and_a_pilot_past_its_ceiling_are_warned(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    """The chart's admission policy holds the token to each scale set's ceiling and needs one;
    a pilot whose up_to passes the ceiling would have its acts past it refused."""
    targets = {
        "linux.open": {"target": "arc-runners/open", "cap": 10},
        "linux.piloted": {
            "target": "arc-runners/piloted",
            "ceiling": 40,
            "pilot": {"up_to": 60, "step": 20},
        },
        "linux.held": {
            "target": "arc-runners/held",
            "ceiling": 40,
            "pilot": {"up_to": 40, "step": 20},
        },
    }
    env = check_env(
        slack,
        redis_url,
        SCALER_BACKEND="arc",
        SCALER_TARGETS=json.dumps(targets),
        SCALE_ALLOWED_USERS="S0ONCALL",
    )

    result = run_check(env, tmp_path)

    assert [line for line in lines(result, "warn") if line.split()[1] == "scaling"] == [
        "warn  scaling    linux.open: no ceiling: nothing outside the bot bounds what its token "
        "may set on arc-runners/open (the chart's admission policy, which holds each scale set "
        'to its ceiling, requires one) — fix: give SCALER_TARGETS["linux.open"] a "ceiling", the '
        'most runners its scale set should ever have (e.g. "ceiling": 40); the chart renders the '
        "same entry into its admission policy",
        "warn  scaling    linux.piloted: its pilot's up_to, 60 runners, is above its ceiling of "
        "40: the pilot's acts past the ceiling would be refused — fix: lower "
        'SCALER_TARGETS["linux.piloted"] "pilot" "up_to" to at most 40, or raise its "ceiling"',
    ]
    assert not [line for line in lines(result, "FAIL") if line.split()[1] == "scaling"]


def test_an_arc_target_whose_scale_set_no_name_gives_fails_as_serve_refuses_it(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    env = check_env(
        slack,
        redis_url,
        SCALER_BACKEND="arc",
        SCALER_TARGETS='{"...": {"cap": 1}}',
        SCALE_ALLOWED_USERS="S0ONCALL",
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 1, result.stderr
    assert lines(result, "FAIL") == [
        'FAIL  settings   SCALER_TARGETS["..."]: no scale set can be derived from this name: give '
        'its "target" (or a RUNNER_SCALE_SETS entry)'
    ]
    assert "Traceback" not in result.stderr


def test_someone_allowed_and_a_cap_within_the_ceiling_pass(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    targets = json.dumps({"linux.big": {"target": "big", "cap": 5, "ceiling": 5}})
    env = check_env(
        slack, redis_url, **WEBHOOK, SCALER_TARGETS=targets, SCALE_ALLOWED_USERS="S0ONCALL"
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 0, result.stdout
    assert not any(line.split()[1] == "scaling" for line in lines(result))


def test_format_json_is_one_document_with_every_check_and_the_same_exit_code(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    """The suite's Redis keeps nothing: a warning; nobody may scale: a failure."""
    env = check_env(slack, redis_url, **WEBHOOK, SCALER_TARGETS='{"linux.big": "big"}')

    result = run_check(env, tmp_path, "check", "--format", "json")

    assert result.returncode == 1
    document = json.loads(result.stdout)
    checks = document["checks"]
    assert all(set(check) == {"name", "status", "message", "fix"} for check in checks)
    assert {check["status"] for check in checks} == {"ok", "warn", "fail"}
    counts = {status: sum(c["status"] == status for c in checks) for status in ("ok", "warn")}
    assert document["counts"] == {**counts, "fail": 1}
    assert document["ok"] is False
    [failed] = [check for check in checks if check["status"] == "fail"]
    assert failed["name"] == "scaling"
    assert failed["fix"].startswith("set SCALE_ALLOWED_USERS to")
    [warned] = [check for check in checks if check["status"] == "warn"]
    assert (warned["name"], warned["fix"][:31]) == ("redis", "turn on AOF (appendonly yes) or")
    assert "a-webhook-secret" not in result.stdout
    assert any(check["name"] == "slack" and check["status"] == "ok" for check in checks)


def test_a_pilot_s_policy_that_cannot_work_is_named_with_its_fix(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    pilots = {
        "linux.a": {"pilot": {"up_to": 5, "step": 10}},
        "linux.b": {"pilot": {"up_to": 5, "step": 1, "hold_seconds": -1}},
        "linux.c": {"pilot": {"up_to": 5, "step": 1, "hold": 60}},
    }
    env = check_env(
        slack,
        redis_url,
        SCALER_BACKEND="arc",
        SCALER_TARGETS=json.dumps(pilots),
        SCALE_ALLOWED_USERS="S0ONCALL",
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 1, result.stdout
    assert lines(result, "FAIL") == [
        'FAIL  settings   SCALER_TARGETS["linux.a"].pilot: step 10 is more than up_to 5: no act '
        "could take a whole step; lower step or raise up_to",
        'FAIL  settings   SCALER_TARGETS["linux.b"].pilot.hold_seconds: Input should be greater '
        "than or equal to 0",
        "FAIL  settings   SCALER_TARGETS[\"linux.c\"].pilot: unknown key 'hold': its keys are "
        "up_to, step, mode, hold_seconds, period_seconds, cooldown_seconds",
    ]
    assert "Traceback" not in result.stderr


def test_a_pilot_on_a_scaler_that_cannot_put_back_is_refused(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    targets = {"linux.big": {"target": "big", "pilot": {"up_to": 10, "step": 5}}}
    env = check_env(
        slack,
        redis_url,
        **WEBHOOK,
        SCALER_TARGETS=json.dumps(targets),
        SCALE_ALLOWED_USERS="S0ONCALL",
    )

    result = run_check(env, tmp_path)

    assert result.returncode == 1
    assert lines(result, "FAIL") == [
        'FAIL  settings   SCALER_TARGETS["linux.big"].pilot: SCALER_BACKEND=webhook cannot put '
        "a scale-up back, so the pilot's acts could have no Undo: remove the pilot, or scale "
        "with arc or aws-asg"
    ]

"""A ValidatingAdmissionPolicy judged as the API server judges it, for what the chart's policy
uses, in CEL (cel-python): what the deploy tests read the chart's policy with, and what the
Kubernetes stand-in's `admission` hook runs, so a test of the bot meets the chart's own policy.

As Kubernetes' policy plugin: the request matched by the policy's `matchConstraints`
(operations and resources: the chart's policy selects every namespace), then every
`matchCondition` true (one in error denies, under failurePolicy Fail), `variables` evaluated (an
error is a value, as in CEL, met only where used), every validation evaluated in order; a false
one or one in error (failurePolicy Fail) is a denial, said by its `messageExpression`, else its
`message`. The API server answers with the
first: 403 Forbidden, "ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
request: <message>" (apiserver's policy/validating dispatcher). Only what Kubernetes' CEL has is
used: `has()`, `==` on maps and lists, `all()` over a map's keys, `in` on a map, `string()`, and
`object`, `oldObject`, `request`, `variables` as plain maps. One difference is known: cel-python
does not compare an int with a double (`120 == 120.0`), where Kubernetes' CEL compares numbers
across types; the integer fields here hold ints.
"""

from __future__ import annotations

from typing import Any

import celpy

CEL = celpy.Environment()
DENIED = "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"


def request_of(
    operation: str,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    user: str,
    *,
    group: str = "actions.github.com",
    resource: str = "autoscalingrunnersets",
) -> dict[str, Any]:
    """What the API server hands a policy: `request`, `object` (null on DELETE), `oldObject`
    (null on CREATE)."""
    named = new or old or {}
    request = {
        "operation": operation,
        "userInfo": {"username": user},
        "namespace": named["metadata"]["namespace"],
        "name": named["metadata"]["name"],
        "resource": {"group": group, "resource": resource},
    }
    return {"request": request, "object": new, "oldObject": old}


def _value(expression: str, activation: dict[str, Any]) -> Any:
    """The expression's value, or the CELEvalError it meets (raised)."""
    program = CEL.program(CEL.compile(expression))
    return program.evaluate(activation)


def _bool(expression: str, activation: dict[str, Any]) -> bool | None:
    """True, False, or None for an error or a value that is no bool (both deny under Fail)."""
    try:
        value = _value(expression, activation)
    except celpy.CELEvalError:
        return None
    if isinstance(value, celpy.CELEvalError):
        return None
    return bool(value) if isinstance(value, celpy.celtypes.BoolType) else None


def matched(policy: dict[str, Any], given: dict[str, Any]) -> bool:
    """The policy's `matchConstraints` and every `matchCondition` select this request."""
    spec = policy["spec"]
    request = given["request"]
    constraints = spec.get("matchConstraints") or {}
    rules = constraints.get("resourceRules") or []
    if not any(
        request["operation"] in rule.get("operations", [])
        and request["resource"]["group"] in rule.get("apiGroups", [])
        and request["resource"]["resource"] in rule.get("resources", [])
        for rule in rules
    ):
        return False
    activation = _activation(given)
    return all(
        _bool(condition["expression"], activation) is True
        for condition in spec.get("matchConditions") or []
    )


def _activation(given: dict[str, Any]) -> dict[str, Any]:
    return {name: celpy.json_to_cel(value) for name, value in given.items()}


def denials(policy: dict[str, Any], given: dict[str, Any]) -> list[str] | None:
    """None when the policy does not match the request; else the message of every validation
    that is false or fails, in order (empty: admitted)."""
    activation = _activation(given)
    conditions = policy["spec"].get("matchConditions") or []
    verdicts = [_bool(condition["expression"], activation) for condition in conditions]
    if False in verdicts:
        return None
    if None in verdicts and policy["spec"].get("failurePolicy", "Fail") == "Fail":
        return ["a matchCondition could not be evaluated: failurePolicy Fail denies"]
    if not matched({**policy, "spec": {**policy["spec"], "matchConditions": []}}, given):
        return None
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables") or []:
        activation["variables"] = celpy.json_to_cel(variables)
        try:
            variables[variable["name"]] = _value(variable["expression"], activation)
        except celpy.CELEvalError as exc:
            variables[variable["name"]] = exc
    activation["variables"] = celpy.celtypes.MapType(
        {celpy.celtypes.StringType(k): v for k, v in variables.items()}
    )
    found = []
    for validation in policy["spec"]["validations"]:
        if _bool(validation["expression"], activation) is True:
            continue
        found.append(_message(validation, activation))
    return found


def _message(validation: dict[str, Any], activation: dict[str, Any]) -> str:
    """The validation's messageExpression where it evaluates to a string, else its message."""
    expression = validation.get("messageExpression")
    if expression:
        try:
            said = _value(expression, activation)
        except celpy.CELEvalError:
            said = None
        if isinstance(said, str) and said.strip():
            return str(said)
    return validation.get("message") or f"failed expression: {validation['expression']}"


def refusal(policy: dict[str, Any], binding: dict[str, Any], given: dict[str, Any]) -> str | None:
    """The API server's refusal of the request, as its message says it, or None: admitted."""
    found = denials(policy, given)
    if not found:
        return None
    return DENIED.format(
        policy=policy["metadata"]["name"], binding=binding["metadata"]["name"], message=found[0]
    )

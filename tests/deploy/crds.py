"""The custom resources the chart makes, which Kubernetes' published schemas do not hold: the fields
of each CRD that the chart uses, with the CRD's own constraints on them (Prometheus Operator's
monitoring.coreos.com/v1, and v1alpha1 for its AlertmanagerConfig; the External Secrets
Operator's external-secrets.io/v1, the version it stores; v1beta1 is deprecated). A field the
chart wrote that the CRD does not have fails: the API server would prune it, or refuse it under
strict field validation."""

from __future__ import annotations

from typing import Any

import jsonschema

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Prometheus Operator's Duration.
DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": NAME},
        "namespace": {"type": "string", "pattern": NAME},
        "labels": STRINGS,
        "annotations": STRINGS,
    },
}


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": METADATA,
            "spec": spec,
        },
    }


SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["selector", "endpoints"],
        "properties": {
            "selector": {
                "type": "object",
                "additionalProperties": False,
                "required": ["matchLabels"],
                "properties": {"matchLabels": STRINGS},
            },
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["port", "path"],
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "interval": {"type": "string", "pattern": DURATION},
                    },
                },
            },
        },
    },
)

PROMETHEUS_RULE = _resource(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "interval": {"type": "string", "pattern": DURATION},
                        "labels": STRINGS,
                        "limit": {"type": "integer"},
                        "query_offset": {"type": "string", "pattern": DURATION},
                        "rules": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["expr"],
                                "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                "properties": {
                                    "alert": {"type": "string"},
                                    "record": {"type": "string"},
                                    "expr": {"type": ["string", "integer"]},
                                    "for": {"type": "string", "pattern": DURATION},
                                    "keep_firing_for": {
                                        "type": "string",
                                        "minLength": 1,
                                        "pattern": DURATION,
                                    },
                                    "labels": STRINGS,
                                    "annotations": STRINGS,
                                },
                            },
                        },
                    },
                },
            }
        },
    },
)

EXTERNAL_SECRET = _resource(
    "external-secrets.io/v1",
    "ExternalSecret",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["secretStoreRef", "target", "dataFrom"],
        "properties": {
            "secretStoreRef": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "kind": {"enum": ["SecretStore", "ClusterSecretStore"]},
                    "name": {"type": "string", "maxLength": 253, "pattern": NAME},
                },
            },
            "refreshInterval": {"type": "string", "pattern": r"^([0-9]+(ns|us|µs|ms|s|m|h))+$"},
            "target": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "maxLength": 253, "pattern": NAME},
                    "creationPolicy": {"enum": ["Owner", "Orphan", "Merge", "None"]},
                    "deletionPolicy": {"enum": ["Delete", "Merge", "Retain"]},
                },
            },
            "dataFrom": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "extract": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["key"],
                            "properties": {"key": {"type": "string", "minLength": 1}},
                        }
                    },
                },
            },
        },
    },
)

# monitoring.coreos.com/v1alpha1, the version the operator serves and stores for it.
SECRET_KEY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key"],
    "properties": {
        "key": {"type": "string"},
        "name": {"type": "string"},
        "optional": {"type": "boolean"},
    },
}
ALERTMANAGER_CONFIG = _resource(
    "monitoring.coreos.com/v1alpha1",
    "AlertmanagerConfig",
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "route": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "receiver": {"type": "string"},
                    "groupBy": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    "groupWait": {"type": "string", "pattern": DURATION},
                    "groupInterval": {"type": "string", "pattern": DURATION},
                    "repeatInterval": {"type": "string", "minLength": 1, "pattern": DURATION},
                    "continue": {"type": "boolean"},
                    "matchers": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1},
                                "value": {"type": "string"},
                                "matchType": {"enum": ["!=", "=", "=~", "!~"]},
                                "regex": {"type": "boolean"},
                            },
                        },
                    },
                },
            },
            "receivers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "webhookConfigs": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "url": {"type": "string"},
                                    "urlSecret": SECRET_KEY,
                                    "sendResolved": {"type": "boolean"},
                                    "maxAlerts": {"type": "integer", "minimum": 0},
                                    "timeout": {"type": "string", "pattern": DURATION},
                                    "httpConfig": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "properties": {
                                            "authorization": {
                                                "type": "object",
                                                "additionalProperties": False,
                                                "properties": {
                                                    "type": {"type": "string"},
                                                    "credentials": SECRET_KEY,
                                                },
                                            },
                                            "followRedirects": {"type": "boolean"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
)

SCHEMAS = {
    "AlertmanagerConfig": ALERTMANAGER_CONFIG,
    "ServiceMonitor": SERVICE_MONITOR,
    "PrometheusRule": PROMETHEUS_RULE,
    "ExternalSecret": EXTERNAL_SECRET,
}


def validate(obj: dict[str, Any]) -> None:
    """Raises jsonschema.ValidationError where `obj` leaves its CRD's fields or constraints."""
    jsonschema.validate(obj, SCHEMAS[obj["kind"]])

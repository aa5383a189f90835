"""What a platform team reaches for beyond the chart's own objects: more environment, volumes, a
priority class, their own ServiceAccount, their security contexts and spread, more NetworkPolicy
peers and another resolver, tuned queue rules and the Alertmanager route. Each reaches the bot's
pods and the upgrade check's alike, in the place Kubernetes reads it."""

from __future__ import annotations

import yaml

from tests.deploy.manifests import (
    CASES,
    NAMESPACE,
    RELEASE,
    SECRET,
    chart,
    container,
    one,
    pod_spec,
    pod_template_labels,
    render,
    render_values,
    selects,
    served_routes,
)


def hook_pods(objects: list[dict]) -> list[dict]:
    return [o["spec"] for o in objects if o["kind"] == "Pod"]


def notes(values: dict) -> str:
    rendered = chart().render(values, name=RELEASE, namespace=NAMESPACE)
    (text,) = [text for path, text in rendered.items() if path.endswith("NOTES.txt")]
    return text


def test_extra_environment_volumes_and_priority_reach_the_bot_and_the_check() -> None:
    values = CASES["escape-hatches"][0]
    objects = render("escape-hatches")
    pods = [pod_spec(objects), *hook_pods(objects)]
    assert len(pods) == 3
    for pod in pods:
        (main,) = pod["containers"]
        env = main["env"]
        # After the chart's own: a name given twice takes the operator's value.
        assert env[-len(values["extraEnv"]) :] == values["extraEnv"]
        assert main["envFrom"][-1] == {"configMapRef": {"name": "proxy-settings"}}
        assert main["volumeMounts"][-1] == values["extraVolumeMounts"][0]
        assert pod["volumes"][-1] == values["extraVolumes"][0]
        assert pod["priorityClassName"] == "ci-platform-critical"


def test_the_ca_bundle_of_the_locked_down_example_is_mounted_where_ssl_cert_file_points() -> None:
    objects = render("locked-down")
    for pod in [pod_spec(objects), *hook_pods(objects)]:
        (main,) = pod["containers"]
        (bundle,) = [e["value"] for e in main["env"] if e["name"] == "SSL_CERT_FILE"]
        (mount,) = [m for m in main["volumeMounts"] if bundle.startswith(m["mountPath"] + "/")]
        assert mount["readOnly"] is True
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["configMap"]["name"] == "corporate-ca-bundle"


def test_an_account_of_yours_is_bound_and_none_is_made() -> None:
    objects = render("escape-hatches")
    assert not [o for o in objects if o["kind"] == "ServiceAccount"]
    for pod in [pod_spec(objects), *hook_pods(objects)]:
        assert pod["serviceAccountName"] == "ci-bots"
    (subject,) = one(objects, "RoleBinding")["subjects"]
    assert (subject["name"], subject["namespace"]) == ("ci-bots", NAMESPACE)


def test_an_account_the_chart_makes_can_be_named() -> None:
    objects = render_values({**SECRET, "serviceAccount": {"name": "queue-bot"}})
    assert one(objects, "ServiceAccount")["metadata"]["name"] == "queue-bot"
    assert pod_spec(objects)["serviceAccountName"] == "queue-bot"
    assert one(objects, "RoleBinding")["subjects"][0]["name"] == "queue-bot"


def test_a_security_context_key_replaces_the_charts_and_null_drops_it() -> None:
    """OpenShift's restricted-v2 picks the user: runAsUser and runAsGroup dropped, the rest kept."""
    objects = render("escape-hatches")
    for pod in [pod_spec(objects), *hook_pods(objects)]:
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "supplementalGroups": [5000],
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        (main,) = pod["containers"]
        assert main["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "WARNING" not in notes(CASES["escape-hatches"][0])


def test_leaving_restricted_is_rendered_and_the_notes_name_each_way() -> None:
    values = {
        **SECRET,
        "podSecurityContext": {"runAsUser": 0},
        "securityContext": {
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": True,
            "capabilities": {"drop": ["NET_RAW"], "add": ["SYS_ADMIN", "NET_BIND_SERVICE"]},
        },
        "extraVolumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}],
        "extraVolumeMounts": [{"name": "docker", "mountPath": "/var/run/docker.sock"}],
    }
    container_context = container(render_values(values))["securityContext"]
    assert container_context["allowPrivilegeEscalation"] is True
    text = notes(values)
    warning = text[text.index("WARNING") :]
    for named in (
        "runAsNonRoot is not true",
        "podSecurityContext.runAsUser is 0",
        "allowPrivilegeEscalation is not false",
        "capabilities.drop does not hold ALL",
        "capabilities.add holds SYS_ADMIN",
        "extraVolumes: docker is a hostPath volume",
    ):
        assert named in warning, named
    assert "NET_BIND_SERVICE" not in warning  # `restricted` allows adding it
    assert "WARNING" not in notes(SECRET)


def test_the_ways_out_of_restricted_beyond_users_and_capabilities_are_named() -> None:
    values = {
        **SECRET,
        "podSecurityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
        "securityContext": {
            "procMount": "Unmasked",
            "appArmorProfile": {"type": "Unconfined"},
            "seLinuxOptions": {"type": "spc_t"},
        },
    }
    warning = notes(values)
    for named in (
        "sysctls sets kernel.msgmax",
        "procMount is not Default",
        "appArmorProfile.type is Unconfined",
        "seLinuxOptions sets a user, a role or a type outside container_*",
    ):
        assert named in warning, named
    safe = {**SECRET, "podSecurityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies"}]}}
    assert "WARNING" not in notes(safe)


def test_secret_files_without_a_group_are_warned_of() -> None:
    """Root's 0440 files the bot cannot read, unless the platform gives the pod a group."""
    values = {**SECRET, "secretFiles": True, "podSecurityContext": {"runAsGroup": None}}
    assert "podSecurityContext.fsGroup" in notes(values)
    assert "WARNING" not in notes({**SECRET, "secretFiles": True})


def test_secret_files_keep_their_group_under_a_group_of_yours() -> None:
    values = {**SECRET, "secretFiles": True, "podSecurityContext": {"runAsGroup": 20000}}
    assert pod_spec(render_values(values))["securityContext"]["fsGroup"] == 20000
    own = {**SECRET, "secretFiles": True, "podSecurityContext": {"fsGroup": 30000}}
    assert pod_spec(render_values(own))["securityContext"]["fsGroup"] == 30000


def test_a_spread_of_yours_replaces_the_charts_and_selects_the_bots_pods() -> None:
    objects = render("escape-hatches")
    (constraint,) = pod_spec(objects)["topologySpreadConstraints"]
    assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
    assert selects(constraint["labelSelector"]["matchLabels"], pod_template_labels(objects))
    none = render_values({**SECRET, "topologySpreadConstraints": []})
    assert "topologySpreadConstraints" not in pod_spec(none)
    chosen = {"matchLabels": {"team": "ci"}}
    mine = [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    mine[0]["labelSelector"] = chosen
    spread = pod_spec(render_values({**SECRET, "topologySpreadConstraints": mine}))
    assert spread["topologySpreadConstraints"][0]["labelSelector"] == chosen


def test_grafana_in_another_namespace_gets_in_on_the_bots_port() -> None:
    policy = one(render("escape-hatches"), "NetworkPolicy")["spec"]
    grafana = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "grafana"}}}
    assert {"from": [grafana], "ports": [{"port": "http", "protocol": "TCP"}]} in policy["ingress"]
    # A rule of yours with its own ports keeps them.
    rule = {"from": [grafana], "ports": [{"port": 9000, "protocol": "TCP"}]}
    values = {**SECRET, "networkPolicy": {"enabled": True, "extraIngress": [rule]}}
    assert rule in one(render_values(values), "NetworkPolicy")["spec"]["ingress"]


def test_dns_goes_to_the_resolver_named_nodelocal_dnscache_included() -> None:
    policy = one(render("locked-down"), "NetworkPolicy")["spec"]
    (dns,) = [rule for rule in policy["egress"] if {"port": 53, "protocol": "UDP"} in rule["ports"]]
    assert {"ipBlock": {"cidr": "169.254.20.10/32"}} in dns["to"]
    openshift = {
        "to": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-dns"}}}
        ],
        "ports": [{"port": 5353, "protocol": "UDP"}, {"port": 5353, "protocol": "TCP"}],
    }
    values = {**SECRET, "networkPolicy": {"enabled": True, "dns": openshift}}
    egress = one(render_values(values), "NetworkPolicy")["spec"]["egress"]
    assert egress[0] == openshift
    assert not [rule for rule in egress if {"port": 53, "protocol": "UDP"} in rule["ports"]]


def test_the_alertmanager_route_posts_the_queue_alerts_to_the_service_with_the_secrets_token() -> (
    None
):
    objects = render("escape-hatches")
    routing = one(objects, "AlertmanagerConfig")
    service = one(objects, "Service")["metadata"]
    assert routing["metadata"]["labels"]["alertmanagerConfig"] == "main"
    (receiver,) = routing["spec"]["receivers"]
    (webhook,) = receiver["webhookConfigs"]
    assert routing["spec"]["route"]["receiver"] == receiver["name"]
    host = f"http://{service['name']}.{service['namespace']}.svc"
    assert webhook["url"].startswith(host + "/")
    assert webhook["url"].removeprefix(host) in served_routes(socket_mode=False)["POST"]
    assert webhook["sendResolved"] is True
    token = webhook["httpConfig"]["authorization"]
    assert token["type"] == "Bearer"
    assert token["credentials"] == {"name": SECRET["existingSecret"], "key": "ALERT_WEBHOOK_TOKEN"}
    (matcher,) = routing["spec"]["route"]["matchers"]
    alerts = matcher["value"].split("|")
    assert matcher["matchType"] == "=~" and set(alerts) == {
        "RunnerJobsQueueing",
        "ARCListenerStalled",
    }
    rules = [
        r
        for o in objects
        if o["kind"] == "PrometheusRule"
        for g in o["spec"]["groups"]
        for r in g["rules"]
    ]
    assert set(alerts) <= {r.get("alert") for r in rules}
    assert not {"QueuepilotNoLeader"} & set(alerts)  # never the bot's own


def test_the_alertmanager_route_names_the_service_port_when_it_is_not_80() -> None:
    values = {**SECRET, "service": {"port": 8080}, "alertmanagerConfig": {"enabled": True}}
    routing = one(render_values(values), "AlertmanagerConfig")
    url = routing["spec"]["receivers"][0]["webhookConfigs"][0]["url"]
    assert url == f"http://{RELEASE}.{NAMESPACE}.svc:8080/alerts/alertmanager"


def test_the_default_queue_rules_render_as_the_rule_file_says() -> None:
    """The file Prometheus can load on its own and the chart's PrometheusRule agree at the
    defaults: nothing is tuned that the file does not say."""
    values = {**SECRET, "prometheusRule": {"queueRules": True}}
    (rule,) = [o for o in render_values(values) if o["kind"] == "PrometheusRule"]
    (text,) = [f["data"] for f in chart().files if f["name"] == "alerts/queue-rules.yaml"]
    source = text.decode() if isinstance(text, bytes) else text
    assert rule["spec"]["groups"] == yaml.safe_load(source)["groups"]


def test_tuned_queue_rules_carry_their_thresholds_and_labels() -> None:
    objects = render("escape-hatches")
    (queues,) = [o for o in objects if o["metadata"]["name"].endswith("-queues")]
    rules = {r.get("alert"): r for g in queues["spec"]["groups"] for r in g["rules"]}
    queueing, stalled = rules["RunnerJobsQueueing"], rules["ARCListenerStalled"]
    assert queueing["expr"].strip().endswith("> 30")
    assert (queueing["for"], stalled["for"]) == ("5m", "4m")
    assert queueing["annotations"]["queue_size_threshold"] == "30"
    for alert in (queueing, stalled):
        assert alert["labels"] == {"priority": "P1", "severity": "warning", "team": "ci-platform"}

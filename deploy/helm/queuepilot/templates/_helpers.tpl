{{/*
Names. `helm install queuepilot …` names every object queuepilot (the ConfigMap
queuepilot-config, the Role queuepilot-scaler); another release name is prefixed to the chart's,
unless it contains it. 63 characters: a DNS label.
*/}}
{{- define "queuepilot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "queuepilot.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "queuepilot.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's pods: the bot's and the upgrade check's (the NetworkPolicy applies to both).
Stable for the release's life (a Deployment's selector is immutable).
*/}}
{{- define "queuepilot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "queuepilot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The bot's pods alone: what the Service sends requests to and the PDB keeps up. */}}
{{- define "queuepilot.botSelectorLabels" -}}
{{ include "queuepilot.selectorLabels" . }}
app.kubernetes.io/component: bot
{{- end }}

{{- define "queuepilot.labels" -}}
helm.sh/chart: {{ include "queuepilot.chart" . }}
{{ include "queuepilot.selectorLabels" . }}
app.kubernetes.io/version: {{ include "queuepilot.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The standard labels and `extra` (a values map): the standard ones win, so nothing relabels the release. */}}
{{- define "queuepilot.labelsWith" -}}
{{- toYaml (merge (include "queuepilot.labels" .context | fromYaml) (.extra | default dict)) }}
{{- end }}

{{/* The version the pods run, as a label value: image.tag (its digest left out), else appVersion. */}}
{{- define "queuepilot.version" -}}
{{- $tag := (.Values.image.tag | default .Chart.AppVersion) | toString | splitList "@" | first }}
{{- regexReplaceAll "[^A-Za-z0-9_.-]" $tag "_" | trunc 63 | trimAll "_.-" }}
{{- end }}

{{- define "queuepilot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The Secret the pods read: the user's, or the one the chart or the External Secrets Operator makes. */}}
{{- define "queuepilot.secretName" -}}
{{- .Values.existingSecret | default (include "queuepilot.fullname" .) }}
{{- end }}

{{/* The port the bot listens on: PORT of the settings, 3000 unless set. */}}
{{- define "queuepilot.port" -}}
{{- (.Values.config | default dict).PORT | default "3000" | int }}
{{- end }}

{{/* "true" when the scaler is ARC's: the pod then calls the Kubernetes API with its token. */}}
{{- define "queuepilot.usesArc" -}}
{{- if eq ((.Values.config | default dict).SCALER_BACKEND | default "" | toString) "arc" }}true{{ end }}
{{- end }}

{{/*
"true" when the chart makes the ValidatingAdmissionPolicy that holds the bot to minRunners and
maxRunners within each scale set's ceiling: with the `arc` scaler, whoever grants its Role,
unless rbac.admissionPolicy is false. Never by what the cluster serves: `helm template` and
Kustomize's helmCharts do not ask it, and a policy that drops out without a word is no bound.
*/}}
{{- define "queuepilot.admissionPolicy" -}}
{{- $wanted := .Values.rbac.admissionPolicy | toString }}
{{- if not (has $wanted (list "true" "false")) }}
{{- fail (printf "rbac.admissionPolicy is %q: it is true (the default: the API server holds the bot's token to each scale set's ceiling; Kubernetes 1.30 or later) or false (nothing outside the bot bounds its token); auto is gone, since it dropped the policy without a word wherever the cluster's API versions were not asked (helm template, Kustomize)" $wanted) }}
{{- end }}
{{- if and (include "queuepilot.usesArc" .) (eq $wanted "true") }}true{{ end }}
{{- end }}

{{/* The policy's and its binding's name: cluster-scoped, so the release's namespace is in it. */}}
{{- define "queuepilot.admissionPolicyName" -}}
{{- printf "%s.%s-scaler" .Release.Namespace (include "queuepilot.fullname" .) }}
{{- end }}

{{/* ARC's namespace, set once: the bot addresses the scale sets there, and the Role is there. */}}
{{- define "queuepilot.arcNamespace" -}}
{{- .Values.arc.namespace | default .Release.Namespace }}
{{- end }}

{{/*
config.<key> as a JSON object, read as the bot reads it (blank or unset: empty), or a refusal
naming it. Helm's fromJson gives {"Error": "<why>"} for text that is no JSON object; a runner type
named Error with a bare target is the one object that looks alike, and is told apart by its text.
*/}}
{{- define "queuepilot.jsonSetting" -}}
{{- $text := index .config .key | default "" | toString | trim }}
{{- $parsed := fromJson (default "{}" $text) | default dict }}
{{- if and (eq (len $parsed) 1) (kindIs "string" (index $parsed "Error")) (not (regexMatch "^\\{\\s*\"Error\"\\s*:\\s*\"[^\"\\\\]*\"\\s*\\}$" $text)) }}
{{- fail (printf "config.%s must be a JSON object (%s): %s" .key (index $parsed "Error") .example) }}
{{- end }}
{{- toJson $parsed }}
{{- end }}

{{/* A runner type's derived scale set, as bot/domain/runner_names.py derives it: each character
other than A-Z, a-z, 0-9 and - made - (before lower-casing, which in Go makes some non-ASCII
letters ASCII where the bot's does not), lower-cased, leading and trailing - dropped. */}}
{{- define "queuepilot.derivedScaleSet" -}}
{{- regexReplaceAll "[^A-Za-z0-9-]" . "-" | lower | trimAll "-" }}
{{- end }}

{{/* What two names of one runner type have in common (runner_key): the derived scale set, or
for a name with nothing to derive its lower case (the bot's casefold, alike but for ß and a few
others). */}}
{{- define "queuepilot.runnerKey" -}}
{{- include "queuepilot.derivedScaleSet" . | default (lower .) }}
{{- end }}

{{/*
The scale sets the `arc` scaler addresses, named as the bot names them (bot/factory.py's
scale_targets): for each runner type of SCALER_TARGETS its "target" where it gives one
(`<namespace>/<name>` or a bare name), else its RUNNER_SCALE_SETS entry (matched as the bot
matches runner types, by runner key), else its derived name; with its ceiling (0: none given). A
JSON list of {type, namespace, name, ceiling}, in runner types' order. Refuses, naming the value
and the fix, what names none, a name Kubernetes would not take (it is written into the admission
policy's CEL), one outside ARC's namespace where the chart makes the Role, or a ceiling that is no
whole number from 1.
*/}}
{{- define "queuepilot.scaleTargets" -}}
{{- $config := .Values.config | default dict }}
{{- $arc := include "queuepilot.arcNamespace" . }}
{{- $example := "{\"linux.2xlarge\": {\"cap\": 10, \"ceiling\": 40}}, runner type -> its cap, ceiling (and optional target)" }}
{{- $targets := include "queuepilot.jsonSetting" (dict "config" $config "key" "SCALER_TARGETS" "example" $example) | fromJson }}
{{- if not $targets }}
{{- fail (printf "config.SCALER_TARGETS is empty: with SCALER_BACKEND arc it names the runner types the bot may scale, and the chart's Role the scale sets it may patch; set it, e.g. '%s'" $example) }}
{{- end }}
{{- $explicit := dict }}
{{- $by := dict }}
{{- $sets := "{\"linux.g5.4xlarge.nvidia.gpu\": \"gpu-a10g\"}, runner type -> its scale set" }}
{{- range $type, $set := include "queuepilot.jsonSetting" (dict "config" $config "key" "RUNNER_SCALE_SETS" "example" $sets) | fromJson }}
{{- $key := include "queuepilot.runnerKey" $type }}
{{- $named := index $explicit $key | default "" }}
{{- if and $named (ne $named (toString $set)) }}
{{- fail (printf "config.RUNNER_SCALE_SETS: %q and %q are one runner type (%s) with two scale sets, %s and %s: keep one entry" (index $by $key) $type $key $named (toString $set)) }}
{{- end }}
{{- $_ := set $explicit $key (toString $set) }}
{{- $_ = set $by $key $type }}
{{- end }}
{{- $found := list }}
{{- range $type, $entry := $targets }}
{{- $target := "" }}
{{- $ceiling := "" }}
{{- if kindIs "string" $entry }}
{{- $target = $entry }}
{{- else if kindIs "map" $entry }}
{{- $target = index $entry "target" | default "" | toString }}
{{- $given := index $entry "ceiling" }}
{{- /* JSON's numbers are floats: 1000000 would print as 1e+06. */}}
{{- if and (kindIs "float64" $given) (eq (floor $given) $given) }}
{{- $ceiling = printf "%.0f" $given }}
{{- else if not (kindIs "invalid" $given) }}
{{- $ceiling = toString $given }}
{{- end }}
{{- end }}
{{- if and $ceiling (not (regexMatch "^([1-9][0-9]{0,5}|1000000)$" $ceiling)) }}
{{- fail (printf "config.SCALER_TARGETS[\"%s\"]: its ceiling %s is no whole number from 1 to 1000000 (as the bot reads it): the most runners its scale set's maxRunners and minRunners may reach, e.g. 40" $type $ceiling) }}
{{- end }}
{{- $name := "" }}
{{- $space := $arc }}
{{- if $target }}
{{- $parts := splitList "/" $target }}
{{- $name = last $parts }}
{{- $space = initial $parts | join "/" | default $arc }}
{{- if and $.Values.rbac.create (ne $space $arc) }}
{{- fail (printf "config.SCALER_TARGETS[\"%s\"]: its target %s is in the namespace %s, but the chart's Role is in ARC's, %s (arc.namespace): set arc.namespace to %s, or rbac.create=false and grant the Role there yourself" $type $target $space $arc $space) }}
{{- end }}
{{- else }}
{{- $name = index $explicit (include "queuepilot.runnerKey" $type) | default (include "queuepilot.derivedScaleSet" $type) }}
{{- if not $name }}
{{- fail (printf "config.SCALER_TARGETS[\"%s\"]: no scale set can be derived from this name: give its \"target\" (or a RUNNER_SCALE_SETS entry)" $type) }}
{{- end }}
{{- end }}
{{- if not (and (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $space) (regexMatch "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" $name)) }}
{{- fail (printf "config.SCALER_TARGETS[\"%s\"]: %s/%s is no AutoscalingRunnerSet's namespace/name (lower-case letters, digits, - and, in the name, .): give its \"target\" as Kubernetes names it" $type $space $name) }}
{{- end }}
{{- $found = append $found (dict "type" $type "namespace" $space "name" $name "ceiling" (int (default "0" $ceiling))) }}
{{- end }}
{{- toJson $found }}
{{- end }}

{{/* The scale sets' names, sorted, each once: the Role's resourceNames. */}}
{{- define "queuepilot.scaleSets" -}}
{{- $names := list }}
{{- range include "queuepilot.scaleTargets" . | fromJsonArray }}
{{- $names = append $names .name }}
{{- end }}
{{- toYaml ($names | uniq | sortAlpha) }}
{{- end }}

{{/*
The admission policy's ceilings as a CEL map, `namespace/name` -> ceiling, from SCALER_TARGETS
alone (the bot reads the same entries): refuses a target without one, and a scale set two runner
types give two ceilings, naming the fix.
*/}}
{{- define "queuepilot.ceilings" -}}
{{- $ceilings := dict }}
{{- $by := dict }}
{{- range include "queuepilot.scaleTargets" . | fromJsonArray }}
{{- $key := printf "%s/%s" .namespace .name }}
{{- if not (int .ceiling) }}
{{- fail (printf "config.SCALER_TARGETS[\"%s\"] has no ceiling: with rbac.admissionPolicy (the default) the API server holds %s's maxRunners and minRunners to it, whoever holds the bot's token; give it one, e.g. {\"cap\": 10, \"ceiling\": 40} (the most runners that scale set should ever have)" .type $key) }}
{{- end }}
{{- $given := index $ceilings $key }}
{{- if and $given (ne (int $given) (int .ceiling)) }}
{{- fail (printf "config.SCALER_TARGETS: %q and %q both scale %s, with the ceilings %d and %d: give them one" (index $by $key) .type $key (int $given) (int .ceiling)) }}
{{- end }}
{{- $_ := set $ceilings $key (int .ceiling) }}
{{- $_ = set $by $key .type }}
{{- end }}
{{- $entries := list }}
{{- range $key := keys $ceilings | sortAlpha }}
{{- $entries = append $entries (printf "'%s': %d" $key (int (index $ceilings $key))) }}
{{- end }}
{{- printf "{%s}" (join ", " $entries) }}
{{- end }}

{{/* The settings as the ConfigMap holds them: `config`, and ARC's namespace from arc.namespace. */}}
{{- define "queuepilot.configData" -}}
{{- $data := dict }}
{{- range $key, $value := .Values.config | default dict }}
{{- if not (kindIs "invalid" $value) }}
{{- $_ := set $data $key (toString $value) }}
{{- end }}
{{- end }}
{{- if include "queuepilot.usesArc" . }}
{{- $_ := set $data "SCALER_ARC_NAMESPACE" (include "queuepilot.arcNamespace" .) }}
{{- end }}
{{- $github := (.Values.webhooks | default dict).github | default dict }}
{{- range $key, $setting := dict "rate" "GITHUB_WEBHOOK_RATE" "concurrency" "GITHUB_WEBHOOK_CONCURRENCY" }}
{{- if not (kindIs "invalid" (index $github $key)) }}
{{- $_ := set $data $setting (toString (index $github $key)) }}
{{- end }}
{{- end }}
{{- toYaml $data }}
{{- end }}

{{/*
The Secret's keys the pod reads from files with secretFiles: those `secrets` gives, or, for a
Secret the chart does not see, the ones the mode requires (others: <NAME>_FILE in `config`).
*/}}
{{- define "queuepilot.secretFileKeys" -}}
{{- $keys := list }}
{{- if .Values.secrets }}
{{- $keys = keys .Values.secrets | sortAlpha }}
{{- else }}
{{- $keys = include "queuepilot.requiredSecrets" . | fromYamlArray }}
{{- end }}
{{- toYaml $keys }}
{{- end }}

{{/*
"true" when GitHub's workflow_job webhook is published: as ingress.githubWebhook.enabled says (or
ingress.githubWebhook itself, the boolean of earlier 0.28 development builds), or, unset, when the chart's own Secret holds
GITHUB_WEBHOOK_SECRET (a Secret it does not see cannot tell it); never without ingress.enabled.
*/}}
{{- define "queuepilot.githubWebhook" -}}
{{- $given := .Values.ingress.githubWebhook }}
{{- $published := $given }}
{{- if kindIs "map" $given }}
{{- $published = $given.enabled }}
{{- end }}
{{- if kindIs "invalid" $published }}
{{- $published = hasKey (.Values.secrets | default dict) "GITHUB_WEBHOOK_SECRET" }}
{{- end }}
{{- if and .Values.ingress.enabled $published }}true{{ end }}
{{- end }}

{{/*
GitHub's Ingress as JSON (host, className, annotations, secretName), or nothing where it is not
published: each of host, className and tls.secretName of ingress.githubWebhook, else the Slack
Ingress's; annotations its own only. Refuses it without a host or without TLS, naming the fix.
*/}}
{{- define "queuepilot.githubIngress" -}}
{{- if include "queuepilot.githubWebhook" . }}
{{- $own := .Values.ingress.githubWebhook }}
{{- if not (kindIs "map" $own) }}{{ $own = dict }}{{ end }}
{{- $host := $own.host | default .Values.ingress.host }}
{{- $secret := ($own.tls | default dict).secretName | default .Values.ingress.tls.secretName }}
{{- if not $host }}
{{- fail "ingress.githubWebhook.host and ingress.host are empty: GitHub posts to https://<host>/webhooks/github; set one, or ingress.githubWebhook.enabled=false (and route GitHub's deliveries yourself)" }}
{{- end }}
{{- if not $secret }}
{{- fail (printf "ingress.githubWebhook.tls.secretName and ingress.tls.secretName are empty: GitHub's webhook needs TLS on its Ingress (its event and delivery headers are not signed); name the Secret with %s's certificate (cert-manager's, through ingress.githubWebhook.annotations), or ingress.githubWebhook.enabled=false and publish it yourself" $host) }}
{{- end }}
{{- toJson (dict "host" $host "className" ($own.className | default .Values.ingress.className) "annotations" ($own.annotations | default dict) "secretName" $secret) }}
{{- end }}
{{- end }}

{{- define "queuepilot.requiredSecrets" -}}
{{- if .Values.socketMode.enabled }}
{{- toYaml (list "SLACK_BOT_TOKEN" "SLACK_APP_TOKEN" "ALERT_WEBHOOK_TOKEN") }}
{{- else }}
{{- toYaml (list "SLACK_BOT_TOKEN" "SLACK_SIGNING_SECRET" "ALERT_WEBHOOK_TOKEN") }}
{{- end }}
{{- end }}

{{/*
The settings that are secrets (SecretStr in bot/config/settings.py; a test keeps the two lists
equal). In a ConfigMap they would be readable by anyone who may read the namespace's config.
*/}}
{{- define "queuepilot.secretSettings" -}}
{{- toYaml (list "SLACK_BOT_TOKEN" "SLACK_SIGNING_SECRET" "SLACK_APP_TOKEN" "REDIS_SENTINEL_PASSWORD" "ALERT_WEBHOOK_TOKEN" "ALERT_WEBHOOK_HMAC_SECRET" "ALERT_WEBHOOK_BASIC_PASSWORD" "GRAFANA_TOKEN" "SCALER_WEBHOOK_SECRET" "PROMETHEUS_TOKEN" "GITHUB_TOKEN" "GITHUB_APP_PRIVATE_KEY" "GITHUB_WEBHOOK_SECRET" "HUD_TOKEN") }}
{{- end }}

{{/* A duration setting in seconds, as the bot reads it: a bare number, or 30s, 2m, 1m30s. */}}
{{- define "queuepilot.seconds" -}}
{{- $text := . | toString | trim | lower }}
{{- if regexMatch "^[0-9]+(\\.[0-9]+)?$" $text }}
{{- $text }}
{{- else }}
{{- $total := 0 }}
{{- range $unit, $seconds := dict "d" 86400 "h" 3600 "m" 60 "s" 1 }}
{{- $part := regexFind (printf "[0-9]+%s" $unit) $text | trimSuffix $unit | default "0" | int }}
{{- $total = add $total (mul $part $seconds) }}
{{- end }}
{{- $total }}
{{- end }}
{{- end }}

{{/*
Refuses values that would deploy a bot that cannot start or cannot be reached, naming the value
and the fix. Included by the Deployment, so every render runs it.
*/}}
{{- define "queuepilot.validate" -}}
{{- $config := .Values.config | default dict }}
{{- $sources := list }}
{{- if .Values.existingSecret }}{{ $sources = append $sources "existingSecret" }}{{ end }}
{{- if .Values.secrets }}{{ $sources = append $sources "secrets" }}{{ end }}
{{- if .Values.externalSecret.enabled }}{{ $sources = append $sources "externalSecret.enabled" }}{{ end }}
{{- if ne (len $sources) 1 }}
{{- $given := ternary "none is set: choose one" (printf "%s are set: keep one" (join " and " $sources)) (empty $sources) }}
{{- fail (printf "queuepilot's secrets come from exactly one of existingSecret (a Secret you made), secrets (values the chart puts in a Secret) or externalSecret.enabled (the External Secrets Operator): %s" $given) }}
{{- end }}
{{- if and .Values.externalSecret.enabled (not .Values.externalSecret.secretStoreRef.name) }}
{{- fail "externalSecret.secretStoreRef.name is empty: name the ClusterSecretStore (or SecretStore, with externalSecret.secretStoreRef.kind) that holds queuepilot's secrets" }}
{{- end }}
{{- if .Values.secrets }}
{{- range include "queuepilot.requiredSecrets" . | fromYamlArray }}
{{- if not (index $.Values.secrets .) }}
{{- fail (printf "secrets.%s is missing or empty: %s needs it (SLACK_BOT_TOKEN, %s and ALERT_WEBHOOK_TOKEN)" . (ternary "Socket Mode (socketMode.enabled)" "HTTP mode" $.Values.socketMode.enabled) (ternary "SLACK_APP_TOKEN" "SLACK_SIGNING_SECRET" $.Values.socketMode.enabled)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range include "queuepilot.secretSettings" . | fromYamlArray }}
{{- if hasKey $config . }}
{{- if not (kindIs "invalid" (index $config .)) }}
{{- fail (printf "config.%s is a secret: the ConfigMap is no place for it; give it with your Secret (existingSecret, secrets or externalSecret) and remove it from config" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if include "queuepilot.usesArc" . }}
{{- $_ := include "queuepilot.scaleSets" . }}
{{- end }}
{{- range $key, $setting := dict "rate" "GITHUB_WEBHOOK_RATE" "concurrency" "GITHUB_WEBHOOK_CONCURRENCY" }}
{{- if hasKey $config $setting }}
{{- fail (printf "config.%s: set webhooks.github.%s instead (one place for the webhook's limits)" $setting $key) }}
{{- end }}
{{- end }}
{{- if hasKey $config "SCALER_ARC_NAMESPACE" }}
{{- fail "config.SCALER_ARC_NAMESPACE: set arc.namespace instead, which puts both the setting and the Role that lets the bot scale in ARC's namespace" }}
{{- end }}
{{- if .Values.secretFiles }}
{{- range include "queuepilot.secretFileKeys" . | fromYamlArray }}
{{- if hasKey $config . }}
{{- if not (kindIs "invalid" (index $config .)) }}
{{- fail (printf "config.%s: with secretFiles the bot reads %s from the file %s_FILE names, and stops when both are set; remove it from config" . . .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.upgradeCheck.enabled }}
{{- $backend := include "queuepilot.seconds" ($config.BACKEND_TIMEOUT_SECONDS | default "10") }}
{{- $slack := include "queuepilot.seconds" ($config.SLACK_TIMEOUT_SECONDS | default "10") }}
{{- $timeout := maxf ($backend | float64) ($slack | float64) }}
{{- $needed := addf $timeout 2 30 | ceil }}
{{- if lt (float64 .Values.upgradeCheck.activeDeadlineSeconds) $needed }}
{{- fail (printf "upgradeCheck.activeDeadlineSeconds (%v) would fail the check before its probes give up (%g s: BACKEND_TIMEOUT_SECONDS or SLACK_TIMEOUT_SECONDS and 2 s) and the pod starts (30 s): raise it to at least %g" .Values.upgradeCheck.activeDeadlineSeconds (addf $timeout 2) $needed) }}
{{- end }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.socketMode.enabled) (not .Values.ingress.host) }}
{{- fail "ingress.host is empty: Slack posts to https://<ingress.host>/slack/events; set it, or ingress.enabled=false (and route Slack's requests yourself), or socketMode.enabled=true" }}
{{- end }}
{{- $_ := include "queuepilot.githubIngress" . }}
{{- if not (empty $config.PORT) }}
{{- $port := toString $config.PORT }}
{{- if or (not (regexMatch "^[0-9]{1,5}$" $port)) (lt (int $port) 1) (gt (int $port) 65535) }}
{{- fail (printf "config.PORT is %q: the port the bot listens on is a number from 1 to 65535 (\"3000\", the default); the container's port and its probes are named from it" $port) }}
{{- end }}
{{- end }}
{{- range $kind, $amounts := .Values.resources | default dict }}
{{- range $resource, $amount := $amounts | default dict }}
{{- if not (regexMatch "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+))?$" (toString $amount)) }}
{{- fail (printf "resources.%s.%s is %q: not a quantity Kubernetes takes; write it as a number, not negative, with an optional suffix (memory: 320Mi, 1Gi; cpu: 50m, 0.5)" $kind $resource (toString $amount)) }}
{{- end }}
{{- end }}
{{- end }}
{{- include "queuepilot.validateDisruptionBudget" . }}
{{- include "queuepilot.validateNetworkPolicy" . }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.name is empty while serviceAccount.create is false: name your ServiceAccount (in the release's namespace) that the pods run as, or set serviceAccount.create=true" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) .Values.serviceAccount.annotations }}
{{- fail (printf "serviceAccount.annotations are set while serviceAccount.create is false: the chart makes no ServiceAccount to put them on; annotate your own (%s) and remove them here" .Values.serviceAccount.name) }}
{{- end }}
{{- $secretSettings := include "queuepilot.secretSettings" . | fromYamlArray }}
{{- range .Values.extraEnv }}
{{- if and (has (upper .name) $secretSettings) (hasKey . "value") }}
{{- fail (printf "extraEnv: %s is a secret, given as a plain value that anyone who may read the Deployment reads; give it valueFrom.secretKeyRef, or as a key of the pods' Secret" .name) }}
{{- end }}
{{- if and (eq (upper .name) "REDIS_URL") (regexMatch "://[^@]*@" (toString .value)) }}
{{- fail "extraEnv: REDIS_URL holds a password as a plain value that anyone who may read the Deployment reads; give it valueFrom.secretKeyRef, or as a key of the pods' Secret" }}
{{- end }}
{{- end }}
{{- if and (not (empty $config.REDIS_URL)) (contains "@" (toString $config.REDIS_URL)) }}
{{- fail "config.REDIS_URL holds a password (user:password@): the ConfigMap is no place for it; put REDIS_URL in your Secret (existingSecret, secrets or externalSecret) and set config.REDIS_URL: null" }}
{{- end }}
{{- if eq (include "queuepilot.serviceAccountName" .) "default" }}
{{- fail "serviceAccount.name is default: the namespace's default ServiceAccount is every pod's that names none, so the bot's Role (patch on the scale sets) and its admission policy would reach them all; name an account of the bot's own, or leave it empty with serviceAccount.create=true (the release's name)" }}
{{- end }}
{{- $tag := .Values.image.tag | toString }}
{{- if and (eq ($tag | splitList "@" | first) "latest") (not (contains "@sha256:" $tag)) }}
{{- fail "image.tag is latest: each pod would run whatever the registry holds when it starts, and two replicas (or a rollback) could run two releases; leave it empty for the chart's appVersion, or pin a release (0.28.0) or a digest (0.28.0@sha256:…)" }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (empty .Values.networkPolicy.dns) }}
{{- fail "networkPolicy.dns is empty: a null egress rule would let the pods reach everything; name the resolver (kube-dns's default, NodeLocal DNSCache's ipBlock, OpenShift's openshift-dns)" }}
{{- end }}
{{- end }}

{{/*
A PodDisruptionBudget that allows no disruption blocks every node drain forever. Kubernetes rounds
a percentage up, for minAvailable and maxUnavailable alike.
*/}}
{{- define "queuepilot.validateDisruptionBudget" -}}
{{- $budget := .Values.podDisruptionBudget }}
{{- $replicas := int .Values.replicaCount }}
{{- if and $budget.enabled (gt $replicas 0) }}
{{- $minimum := not (kindIs "invalid" $budget.minAvailable) }}
{{- $given := ternary $budget.minAvailable $budget.maxUnavailable $minimum | toString }}
{{- $count := int $given }}
{{- if hasSuffix "%" $given }}
{{- $count = ceil (divf (mulf $replicas (trimSuffix "%" $given | float64)) 100) | int }}
{{- end }}
{{- $allowed := ternary (sub $replicas $count) $count $minimum }}
{{- if lt (int $allowed) 1 }}
{{- fail (printf "podDisruptionBudget.%s %s with replicaCount %d lets no pod be evicted, so every node drain waits forever: keep maxUnavailable: 1 (and minAvailable: null), raise replicaCount, or set podDisruptionBudget.enabled=false" (ternary "minAvailable" "maxUnavailable" $minimum) $given $replicas) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
With the NetworkPolicy, every in-cluster host (<service>.<namespace>.svc) of the settings must be
in a namespace it lets the pods reach: Redis's in redisNamespace, Prometheus's, Alertmanager's
and Grafana's in monitoringNamespace, or any in a namespace an extraEgress rule names (by its
kubernetes.io/metadata.name label, matched or In). A host on HTTPS's port is taken as reached by
the rule for anywhere. An extraEgress rule to everywhere (no `to`, or a namespaceSelector with no
labels) lets anything through. A password (user:password@) is left out before hosts are read.
*/}}
{{- define "queuepilot.validateNetworkPolicy" -}}
{{- $policy := .Values.networkPolicy }}
{{- if $policy.enabled }}
{{- range $k, $rule := $policy.extraEgress | default list }}
{{- if not (or ($rule | default dict).to ($rule | default dict).ports) }}
{{- fail (printf "networkPolicy.extraEgress[%d] is a rule with no to and no ports: it lets the pods reach everything; name its peers (to: a namespaceSelector, podSelector or ipBlock) and its ports, or remove it" $k) }}
{{- end }}
{{- end }}
{{- /* An extra ingress rule gets the pods' port unless it names its own: without `from` it admits anyone. */}}
{{- range $k, $rule := $policy.extraIngress | default list }}
{{- if not ($rule | default dict).from }}
{{- fail (printf "networkPolicy.extraIngress[%d] is a rule with no from: it lets anyone reach the pods' port, the alert webhooks and /metrics included; name its peers (from: a namespaceSelector, podSelector or ipBlock), or remove it" $k) }}
{{- end }}
{{- end }}
{{- $extra := list }}
{{- $open := false }}
{{- range $policy.extraEgress }}
{{- if not .to }}{{ $open = true }}{{ end }}
{{- range .to }}
{{- if hasKey . "namespaceSelector" }}
{{- $labels := (.namespaceSelector | default dict).matchLabels | default dict }}
{{- if empty .namespaceSelector }}{{ $open = true }}{{ end }}
{{- with index $labels "kubernetes.io/metadata.name" }}{{ $extra = append $extra . }}{{ end }}
{{- range (.namespaceSelector | default dict).matchExpressions }}
{{- if and (eq .key "kubernetes.io/metadata.name") (eq .operator "In") }}
{{- $extra = concat $extra .values }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $expected := dict "REDIS_URL" "redisNamespace" "REDIS_SENTINELS" "redisNamespace" "PROMETHEUS_URL" "monitoringNamespace" "ALERTMANAGER_URL" "monitoringNamespace" "GRAFANA_URL" "monitoringNamespace" }}
{{- range $key, $value := .Values.config | default dict }}
{{- if and (not $open) (not (kindIs "invalid" $value)) }}
{{- range splitList "," (regexReplaceAll "^([a-zA-Z+]+://)?[^@]*@" (toString $value) "${1}" | lower) }}
{{- $host := regexFind "[a-z0-9]([-a-z0-9.]*[a-z0-9])?\\.svc(\\.cluster\\.local)?\\b" . }}
{{- if $host }}
{{- $namespace := regexReplaceAll "^(.*\\.)?([^.]+)\\.svc(\\.cluster\\.local)?$" $host "${2}" }}
{{- $field := get $expected $key }}
{{- $allowed := $extra }}
{{- if $field }}{{ $allowed = append $allowed (get $policy $field) }}{{ end }}
{{- $https := and (hasPrefix "https://" .) (not (regexMatch "\\.svc(\\.cluster\\.local)?\\.?:[0-9]+" .)) }}
{{- if not (or (has $namespace $allowed) $https) }}
{{- if $field }}
{{- fail (printf "config.%s names a host in the namespace %s, where networkPolicy.%s (%s) lets the pods reach no such server: set networkPolicy.%s to %s, or add a networkPolicy.extraEgress rule for the namespace %s" $key $namespace $field (get $policy $field) $field $namespace $namespace) }}
{{- else }}
{{- fail (printf "config.%s names a host in the namespace %s, which the NetworkPolicy lets the pods reach only on HTTPS's port: add a networkPolicy.extraEgress rule for the namespace %s and its port" $key $namespace $namespace) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pods' ServiceAccount: the chart's (named as the release), or yours (serviceAccount.name). */}}
{{- define "queuepilot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "queuepilot.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The pod's security context, `restricted` by default (values.yaml). With secretFiles the Secret's
files belong to the pod's group (fsGroup, mode 0440): the bot's user reads them, no other user
in the pod does.
*/}}
{{- define "queuepilot.podSecurityContext" -}}
{{- $context := deepCopy (.Values.podSecurityContext | default dict) }}
{{- if and .Values.secretFiles (not (hasKey $context "fsGroup")) (hasKey $context "runAsGroup") }}
{{- $_ := set $context "fsGroup" $context.runAsGroup }}
{{- end }}
{{- toYaml $context }}
{{- end }}

{{- define "queuepilot.containerSecurityContext" -}}
{{- toYaml (.Values.securityContext | default dict) }}
{{- end }}

{{/*
How the pods would leave the `restricted` Pod Security Standard (kubernetes.io/docs/concepts/
security/pod-security-standards), one line each: the notes warn, since a namespace enforcing it
would refuse the pods.
*/}}
{{- define "queuepilot.restrictedWarnings" -}}
{{- $pod := .Values.podSecurityContext | default dict }}
{{- $container := .Values.securityContext | default dict }}
{{- $found := list }}
{{- $nonRoot := ternary $container.runAsNonRoot $pod.runAsNonRoot (hasKey $container "runAsNonRoot") }}
{{- if not $nonRoot }}
{{- $found = append $found "runAsNonRoot is not true (podSecurityContext or securityContext)" }}
{{- end }}
{{- range $where, $context := dict "podSecurityContext" $pod "securityContext" $container }}
{{- if and (hasKey $context "runAsUser") (eq (toString $context.runAsUser) "0") }}
{{- $found = append $found (printf "%s.runAsUser is 0 (root)" $where) }}
{{- end }}
{{- if eq (($context.appArmorProfile | default dict).type | default "") "Unconfined" }}
{{- $found = append $found (printf "%s.appArmorProfile.type is Unconfined" $where) }}
{{- end }}
{{- $selinux := $context.seLinuxOptions | default dict }}
{{- if or $selinux.user $selinux.role (not (has ($selinux.type | default "") (list "" "container_t" "container_init_t" "container_kvm_t" "container_engine_t"))) }}
{{- $found = append $found (printf "%s.seLinuxOptions sets a user, a role or a type outside container_*" $where) }}
{{- end }}
{{- if ($context.windowsOptions | default dict).hostProcess }}
{{- $found = append $found (printf "%s.windowsOptions.hostProcess is true" $where) }}
{{- end }}
{{- end }}
{{- range $pod.sysctls }}
{{- if not (has .name (list "kernel.shm_rmid_forced" "net.ipv4.ip_local_port_range" "net.ipv4.ip_unprivileged_port_start" "net.ipv4.tcp_syncookies" "net.ipv4.ping_group_range" "net.ipv4.ip_local_reserved_ports" "net.ipv4.tcp_keepalive_time" "net.ipv4.tcp_fin_timeout" "net.ipv4.tcp_keepalive_intvl" "net.ipv4.tcp_keepalive_probes")) }}
{{- $found = append $found (printf "podSecurityContext.sysctls sets %s, which is not a safe sysctl" .name) }}
{{- end }}
{{- end }}
{{- if not (has ($container.procMount | default "Default") (list "Default")) }}
{{- $found = append $found "securityContext.procMount is not Default" }}
{{- end }}
{{- $seccomp := (ternary $container.seccompProfile $pod.seccompProfile (hasKey $container "seccompProfile")) | default dict }}
{{- if not (has ($seccomp.type | default "") (list "RuntimeDefault" "Localhost")) }}
{{- $found = append $found "seccompProfile.type is neither RuntimeDefault nor Localhost" }}
{{- end }}
{{- if ne (toString $container.allowPrivilegeEscalation) "false" }}
{{- $found = append $found "securityContext.allowPrivilegeEscalation is not false" }}
{{- end }}
{{- if $container.privileged }}
{{- $found = append $found "securityContext.privileged is true" }}
{{- end }}
{{- $capabilities := $container.capabilities | default dict }}
{{- if not (has "ALL" ($capabilities.drop | default list)) }}
{{- $found = append $found "securityContext.capabilities.drop does not hold ALL" }}
{{- end }}
{{- range without ($capabilities.add | default list) "NET_BIND_SERVICE" }}
{{- $found = append $found (printf "securityContext.capabilities.add holds %s" .) }}
{{- end }}
{{- range .Values.extraVolumes }}
{{- $kinds := without (keys .) "name" }}
{{- if not (has (first $kinds | default "") (list "configMap" "csi" "downwardAPI" "emptyDir" "ephemeral" "persistentVolumeClaim" "projected" "secret")) }}
{{- $found = append $found (printf "extraVolumes: %s is a %s volume" .name (join "," $kinds)) }}
{{- end }}
{{- end }}
{{- toYaml $found }}
{{- end }}

{{/*
The replicas' spread: topologySpreadConstraints as given (a constraint without labelSelector gets
the bot's pods'), or the chart's: on different nodes (required), and zones (preferred).
*/}}
{{- define "queuepilot.topologySpreadConstraints" -}}
{{- $selector := dict "matchLabels" (include "queuepilot.botSelectorLabels" . | fromYaml) }}
{{- $given := .Values.topologySpreadConstraints }}
{{- if kindIs "slice" $given }}
{{- $constraints := list }}
{{- range $given }}
{{- $constraint := deepCopy . }}
{{- if not (hasKey $constraint "labelSelector") }}
{{- $_ := set $constraint "labelSelector" $selector }}
{{- end }}
{{- $constraints = append $constraints $constraint }}
{{- end }}
{{- toYaml $constraints }}
{{- else -}}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
  nodeTaintsPolicy: Honor
  labelSelector:
    {{- toYaml $selector | nindent 4 }}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    {{- toYaml $selector | nindent 4 }}
{{- end }}
{{- end }}

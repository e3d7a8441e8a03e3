{{/* Chart name, truncated to 63 characters (a DNS label). */}}
{{- define "relevancy-monitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "relevancy-monitor.fullname" -}}
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

{{- define "relevancy-monitor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of a component: include with (dict "ctx" $ "component" "consumer"). */}}
{{- define "relevancy-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relevancy-monitor.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Common labels of a component. */}}
{{- define "relevancy-monitor.labels" -}}
helm.sh/chart: {{ include "relevancy-monitor.chart" .ctx }}
{{ include "relevancy-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: relevancy-monitor
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "relevancy-monitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "relevancy-monitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: the repository you pushed the image to (no default: the chart names no registry), a version
tag (the appVersion by default), never latest. */}}
{{- define "relevancy-monitor.image" -}}
{{- $repository := required "image.repository is required: the repository you pushed the image to (docker build -t <repository>:<tag> .)" .Values.image.repository }}
{{- $tag := toString (default .Chart.AppVersion .Values.image.tag) }}
{{- if or (eq $tag "latest") (eq $tag "") }}
{{- fail "image.tag must be a version tag such as 0.1.0, not \"latest\"" }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" $repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository $tag }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the drain budget plus a margin. */}}
{{- define "relevancy-monitor.terminationGrace" -}}
{{- add (int (ceil .Values.shutdownGraceSeconds)) (int .Values.terminationGraceMarginSeconds) }}
{{- end }}

{{/* Whether the judge is an LLM judge (rubric or statements): it calls a provider. */}}
{{- define "relevancy-monitor.llmJudge" -}}
{{- if ne .Values.judge.method "lexical" }}true{{ end }}
{{- end }}

{{/* The judge's provider: judge.provider, anthropic when empty. */}}
{{- define "relevancy-monitor.judgeProvider" -}}
{{- default "anthropic" .Values.judge.provider }}
{{- end }}

{{/* MONITOR_JUDGE_MODEL: judge.model, or for the anthropic provider claude-haiku-5-5, the monitor's default, pinned
here as in earlier releases of the chart (a new image never changes the judge_id by itself). Every other provider
names its models its own way: the render fails without one. */}}
{{- define "relevancy-monitor.judgeModel" -}}
{{- $provider := include "relevancy-monitor.judgeProvider" . }}
{{- if .Values.judge.model }}
{{- .Values.judge.model }}
{{- else if eq $provider "anthropic" }}
{{- print "claude-haiku-5-5" }}
{{- else }}
{{- $examples := dict "openai" "Qwen/Qwen2.5-7B-Instruct on vLLM, gpt-4.1-mini on OpenAI" "azure_openai" "the deployment name" }}
{{- $_ := set $examples "bedrock" "us.anthropic.claude-haiku-4-5-20251001-v1:0" }}
{{- $_ = set $examples "vertex" "claude-haiku-4-5@20251001" }}
{{- fail (printf "judge.model is required with judge.provider=%s: the model as that provider names it (e.g. %s)" $provider (get $examples $provider)) }}
{{- end }}
{{- end }}

{{/* The provider settings of the judge (NAME: "value" lines), each written only when it differs from the monitor's
default, so the values of earlier releases of the chart render the same settings. The consumer's ConfigMap and the
evaluator's canary both take them from here. Fails the render on a combination the monitor would refuse at start. */}}
{{- define "relevancy-monitor.judgeProviderSettings" -}}
{{- $j := .Values.judge }}
{{- $provider := include "relevancy-monitor.judgeProvider" . }}
{{- if and (eq $provider "azure_openai") (not $j.baseUrl) }}
{{- fail "judge.baseUrl is required with judge.provider=azure_openai, e.g. https://NAME.openai.azure.com/openai/v1" }}
{{- end }}
{{- $shadowProvider := default $provider $j.shadow.provider }}
{{- /* Without a region a cloud client stops at start: Vertex's always, Bedrock's unless the pod happens to have AWS_REGION
(which the chart cannot set: it is no setting of the monitor). */}}
{{- range $cloud := list "bedrock" "vertex" }}
{{- if and (or (eq $provider $cloud) (and $j.shadow.method (eq $shadowProvider $cloud))) (not $j.region) }}
{{- fail (printf "judge.region is required with the %s provider (the shadow judge's too), e.g. %s" $cloud (ternary "us-east-1" "us-east5" (eq $cloud "bedrock"))) }}
{{- end }}
{{- end }}
{{- if ne $provider "anthropic" }}
MONITOR_JUDGE_PROVIDER: {{ $provider | quote }}
{{- end }}
{{- with $j.baseUrl }}
MONITOR_JUDGE_BASE_URL: {{ . | quote }}
{{- end }}
{{- with $j.region }}
MONITOR_JUDGE_REGION: {{ . | quote }}
{{- end }}
{{- with $j.project }}
MONITOR_JUDGE_PROJECT: {{ . | quote }}
{{- end }}
{{- if ne (default "auto" $j.structuredOutput) "auto" }}
MONITOR_JUDGE_STRUCTURED_OUTPUT: {{ $j.structuredOutput | quote }}
{{- end }}
{{- end }}

{{/* The shadow judge's settings (NAME: "value" lines, the consumer's alone), each written only when set. Fails the
render where the monitor would refuse them at start: a shadow value without judge.shadow.method, another provider
without a model, an endpoint or a key. */}}
{{- define "relevancy-monitor.shadowSettings" -}}
{{- $j := .Values.judge }}
{{- $s := $j.shadow }}
{{- $provider := include "relevancy-monitor.judgeProvider" . }}
{{- if $s.method }}
{{- $other := and $s.provider (ne $s.provider $provider) }}
{{- if and $other (ne $s.method "lexical") }}
{{- if not $s.model }}
{{- fail (printf "judge.shadow.model is required: judge.shadow.provider=%s differs from judge.provider=%s" $s.provider $provider) }}
{{- end }}
{{- if and (eq $s.provider "azure_openai") (not $s.baseUrl) }}
{{- fail "judge.shadow.baseUrl is required with judge.shadow.provider=azure_openai, e.g. https://NAME.openai.azure.com/openai/v1" }}
{{- end }}
{{- $needsKey := or (has $s.provider (list "anthropic" "azure_openai")) (and (eq $s.provider "openai") (not $s.baseUrl)) }}
{{- if and $needsKey (not $s.apiKey.existingSecret) }}
{{- fail (printf "judge.shadow.apiKey.existingSecret is required: the %s shadow judge takes no key of the %s primary" $s.provider $provider) }}
{{- end }}
{{- end }}
MONITOR_SHADOW_JUDGE: {{ $s.method | quote }}
{{- with $s.provider }}
MONITOR_SHADOW_JUDGE_PROVIDER: {{ . | quote }}
{{- end }}
{{- with $s.model }}
MONITOR_SHADOW_JUDGE_MODEL: {{ . | quote }}
{{- end }}
{{- with $s.baseUrl }}
MONITOR_SHADOW_JUDGE_BASE_URL: {{ . | quote }}
{{- end }}
{{- if not (kindIs "string" $s.sampleRate) }}
MONITOR_SHADOW_SAMPLE_RATE: {{ $s.sampleRate | toString | quote }}
{{- end }}
{{- else }}
{{- range $name := list "provider" "model" "baseUrl" }}
{{- if get $s $name }}
{{- fail (printf "judge.shadow.%s is set but judge.shadow.method is empty: name the shadow judge it belongs to" $name) }}
{{- end }}
{{- end }}
{{- if or (not (kindIs "string" $s.sampleRate)) $s.apiKey.existingSecret }}
{{- fail "judge.shadow.sampleRate or apiKey is set but judge.shadow.method is empty: name the shadow judge it belongs to" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The env entry of the judge's API key (from judge.apiKey's Secret), by provider: anthropic as
MONITOR_ANTHROPIC_API_KEY, as in earlier releases of the chart; openai and azure_openai as MONITOR_JUDGE_API_KEY;
none for bedrock and vertex, which take the pod's cloud identity (serviceAccount.annotations). */}}
{{- define "relevancy-monitor.judgeKeyEnv" -}}
{{- $j := .Values.judge }}
{{- $provider := include "relevancy-monitor.judgeProvider" . }}
{{- $secret := $j.apiKey.existingSecret }}
{{- if eq $provider "anthropic" }}
- name: MONITOR_ANTHROPIC_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "judge.apiKey.existingSecret is required for the rubric and statements judges" $secret }}
      key: {{ $j.apiKey.key }}
{{- else if has $provider (list "openai" "azure_openai") }}
{{- if eq $secret "anthropic-api-key" }}
{{- fail (printf "judge.apiKey.existingSecret is anthropic-api-key, the chart's default for the anthropic provider: with judge.provider=%s name the Secret of this provider's key, or an empty name for a server of your own without auth" $provider) }}
{{- end }}
{{- if and (not $secret) (or (eq $provider "azure_openai") (not $j.baseUrl)) }}
{{- fail (printf "judge.apiKey.existingSecret is required with judge.provider=%s%s" $provider (ternary "" " and no judge.baseUrl (OpenAI's own service); a server of your own: set judge.baseUrl" (eq $provider "azure_openai"))) }}
{{- end }}
{{- with $secret }}
- name: MONITOR_JUDGE_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $j.apiKey.key }}
{{- end }}
{{- end }}
{{- end }}

{{/* Whether the consumer needs the primary's key: an LLM judge, or an LLM shadow judge of the primary's provider
without a key of its own (the shadow then uses the primary's). */}}
{{- define "relevancy-monitor.consumerNeedsJudgeKey" -}}
{{- $s := .Values.judge.shadow }}
{{- $provider := include "relevancy-monitor.judgeProvider" . }}
{{- $shadowOnPrimaryKey := and (has $s.method (list "rubric" "statements")) (eq (default $provider $s.provider) $provider) (not $s.apiKey.existingSecret) }}
{{- if or (include "relevancy-monitor.llmJudge" .) $shadowOnPrimaryKey }}true{{ end }}
{{- end }}

{{/* The env entry of the shadow judge's own API key, when it has one. */}}
{{- define "relevancy-monitor.shadowKeyEnv" -}}
{{- $s := .Values.judge.shadow }}
{{- if and $s.method $s.apiKey.existingSecret }}
- name: MONITOR_SHADOW_JUDGE_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $s.apiKey.existingSecret }}
      key: {{ $s.apiKey.key }}
{{- end }}
{{- end }}

{{/* The TCP port of an http(s) URL: the one it names, else 443 for https and 80 for http. */}}
{{- define "relevancy-monitor.urlPort" -}}
{{- $url := urlParse . }}
{{- $port := regexFind ":[0-9]+$" $url.host | trimPrefix ":" }}
{{- $port | default (ternary "443" "80" (eq $url.scheme "https")) }}
{{- end }}

{{/* Pod-level securityContext (restricted Pod Security Standard). */}}
{{- define "relevancy-monitor.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsGroup }}
fsGroup: {{ .Values.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container-level securityContext (restricted Pod Security Standard). */}}
{{- define "relevancy-monitor.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsGroup }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* ClickHouse env: URL, database, table, credentials from the existing Secret, CA file. Used by every pod. */}}
{{- define "relevancy-monitor.clickhouseEnv" -}}
{{- $ch := .Values.clickhouse -}}
- name: MONITOR_CLICKHOUSE_URL
  value: {{ $ch.url | quote }}
- name: MONITOR_CLICKHOUSE_DATABASE
  value: {{ $ch.database | quote }}
- name: MONITOR_CLICKHOUSE_TABLE
  value: {{ $ch.table | quote }}
{{- if not (kindIs "invalid" .Values.privacy.retentionDays) }}
- name: MONITOR_RETENTION_DAYS
  value: {{ .Values.privacy.retentionDays | toString | quote }}
{{- end }}
- name: MONITOR_TEXT_RETENTION_DAYS
  value: {{ .Values.privacy.textRetentionDays | toString | quote }}
{{- with $ch.auth.existingSecret }}
- name: MONITOR_CLICKHOUSE_USER
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $ch.auth.userKey }}
- name: MONITOR_CLICKHOUSE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $ch.auth.passwordKey }}
{{- end }}
{{- if $ch.tls.existingSecret }}
- name: MONITOR_CLICKHOUSE_CA_FILE
  value: /etc/relevancy-monitor/clickhouse-tls/{{ $ch.tls.caKey }}
{{- end }}
{{- end }}

{{/* Env common to every container: HOME on the writable /tmp and the log format. */}}
{{- define "relevancy-monitor.baseEnv" -}}
- name: HOME
  value: /tmp
- name: MONITOR_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: MONITOR_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- end }}

{{/* Volumes common to every pod: /tmp and the TLS secrets. */}}
{{- define "relevancy-monitor.baseVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- with .Values.clickhouse.tls.existingSecret }}
- name: clickhouse-tls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{- define "relevancy-monitor.baseVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.clickhouse.tls.existingSecret }}
- name: clickhouse-tls
  mountPath: /etc/relevancy-monitor/clickhouse-tls
  readOnly: true
{{- end }}
{{- end }}

{{/* HTTP probes on the metrics port. */}}
{{- define "relevancy-monitor.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  {{- toYaml .probes.startupProbe | nindent 2 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  {{- toYaml .probes.livenessProbe | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  {{- toYaml .probes.readinessProbe | nindent 2 }}
{{- end }}

{{/* Fail the render on a name in .names that is no setting of the monitor (the chart's files/settings.txt, the list
the code accepts), naming .where and the closest setting: the pod would otherwise fail at start on "unknown setting".
Include with (dict "ctx" $ "where" "extraSettings" "names" (keys .Values.extraSettings)). */}}
{{- define "relevancy-monitor.checkSettingNames" -}}
{{- $known := list }}
{{- range splitList "\n" (.ctx.Files.Get "files/settings.txt") }}
{{- $line := trim . }}
{{- if and $line (not (hasPrefix "#" $line)) }}{{ $known = append $known $line }}{{ end }}
{{- end }}
{{- if not $known }}
{{- fail "files/settings.txt, the chart's list of the monitor's settings, is missing from the chart" }}
{{- end }}
{{- range $name := .names }}
{{- if not (has $name $known) }}
{{- $close := include "relevancy-monitor.closestSetting" (dict "name" $name "known" $known) }}
{{- $hint := ternary (printf " (did you mean %s?)" $close) "" (ne $close "") }}
{{- fail (printf "%s: %s is not a setting of relevancy-monitor %s%s; the chart's files/settings.txt lists them all" $.where $name $.ctx.Chart.AppVersion $hint) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The setting of .known closest to .name, for a did-you-mean: the most two-letter pieces in common after the
MONITOR_/ALERTS_ prefix (Dice's coefficient), among the names of the same prefix; empty when none shares half. */}}
{{- define "relevancy-monitor.closestSetting" -}}
{{- $prefix := regexFind "^[A-Z]+_" .name }}
{{- $word := trimPrefix $prefix .name }}
{{- $pairs := list }}
{{- range $i := until (int (max 0 (sub (len $word) 1))) }}{{ $pairs = append $pairs (substr $i (int (add $i 2)) $word) }}{{ end }}
{{- $best := "" }}
{{- $bestScore := 0 }}
{{- range $candidate := .known }}
{{- if hasPrefix $prefix $candidate }}
{{- $other := trimPrefix $prefix $candidate }}
{{- $theirs := list }}
{{- range $i := until (int (max 0 (sub (len $other) 1))) }}{{ $theirs = append $theirs (substr $i (int (add $i 2)) $other) }}{{ end }}
{{- $common := 0 }}
{{- range $pairs }}{{ if has . $theirs }}{{ $common = add1 $common }}{{ end }}{{ end }}
{{- $total := add (len $pairs) (len $theirs) }}
{{- $score := 0 }}
{{- if gt (int $total) 0 }}{{ $score = div (mul 200 $common) $total }}{{ end }}
{{- if gt (int $score) (int $bestScore) }}{{ $best = $candidate }}{{ $bestScore = $score }}{{ end }}
{{- end }}
{{- end }}
{{- if ge (int $bestScore) 50 }}{{ $best }}{{ end }}
{{- end }}

{{/* The settings the chart writes to the settings ConfigMap from its own values. */}}
{{- define "relevancy-monitor.chartSettingsData" -}}
{{- $k := .Values.kafka -}}
MONITOR_KAFKA_BOOTSTRAP_SERVERS: {{ required "kafka.bootstrapServers is required" $k.bootstrapServers | quote }}
MONITOR_KAFKA_TOPICS: {{ join "," $k.topics | quote }}
MONITOR_KAFKA_GROUP_ID: {{ $k.groupId | quote }}
MONITOR_KAFKA_AUTO_OFFSET_RESET: {{ $k.autoOffsetReset | quote }}
MONITOR_KAFKA_SECURITY_PROTOCOL: {{ $k.securityProtocol | quote }}
{{- with $k.sasl.mechanism }}
MONITOR_KAFKA_SASL_MECHANISM: {{ . | quote }}
{{- end }}
{{- with $k.sasl.username }}
MONITOR_KAFKA_SASL_USERNAME: {{ . | quote }}
{{- end }}
{{- if $k.tls.existingSecret }}
MONITOR_KAFKA_SSL_CAFILE: {{ printf "/etc/relevancy-monitor/kafka-tls/%s" $k.tls.caKey | quote }}
{{- with $k.tls.certKey }}
MONITOR_KAFKA_SSL_CERTFILE: {{ printf "/etc/relevancy-monitor/kafka-tls/%s" . | quote }}
{{- end }}
{{- if and $k.tls.keyKey (not $k.tls.certKey) }}
{{- fail "kafka.tls.keyKey needs kafka.tls.certKey (the certificate of that key)" }}
{{- end }}
{{- with $k.tls.keyKey }}
MONITOR_KAFKA_SSL_KEYFILE: {{ printf "/etc/relevancy-monitor/kafka-tls/%s" . | quote }}
{{- end }}
{{- end }}
MONITOR_DLQ_TOPIC: {{ .Values.dlq.topic | quote }}
MONITOR_DLQ_CREATE: {{ .Values.dlq.create | toString | quote }}
MONITOR_JUDGE: {{ .Values.judge.method | quote }}
MONITOR_JUDGE_MODEL: {{ include "relevancy-monitor.judgeModel" . | quote }}
MONITOR_JUDGE_CONCURRENCY: {{ .Values.judge.concurrency | toString | quote }}
{{- with .Values.judge.requestsPerMinute }}
MONITOR_JUDGE_REQUESTS_PER_MINUTE: {{ . | toString | quote }}
{{- end }}
{{- include "relevancy-monitor.judgeProviderSettings" . }}
{{- include "relevancy-monitor.shadowSettings" . }}
MONITOR_REDACT: {{ .Values.privacy.redact | toString | quote }}
MONITOR_STORE_TEXT: {{ .Values.privacy.storeText | quote }}
MONITOR_SHUTDOWN_GRACE_S: {{ .Values.shutdownGraceSeconds | toString | quote }}
MONITOR_METRICS_PORT: {{ .Values.metricsPort | toString | quote }}
MONITOR_SAMPLING_FILE: "/etc/relevancy-monitor/sampling/sampling.yaml"
MONITOR_AUTO_MIGRATE: {{ not .Values.migrate.enabled | toString | quote }}
{{- end }}

{{/* The data of the settings ConfigMap: the MONITOR_* settings of the consumer, which the migrate Job reads too (from
its own hook copy, rendered from this). Fails the render on an extraSettings name that the chart sets from a value of
its own, a secret, or no setting. */}}
{{- define "relevancy-monitor.settingsData" -}}
{{- $chart := include "relevancy-monitor.chartSettingsData" . }}
{{- $chart }}
{{- $written := $chart | fromYaml }}
{{- $own := list "MONITOR_REDACT" "MONITOR_STORE_TEXT" "MONITOR_RETENTION_DAYS" "MONITOR_TEXT_RETENTION_DAYS" "MONITOR_JUDGE" "MONITOR_AUTO_MIGRATE" }}
{{- /* The judge's provider settings (judge.provider, baseUrl, region, project, structuredOutput, judge.shadow.provider
and baseUrl): refused even when left at the monitor's default (and so not written), or the chart's key and credential
wiring would not be the provider's. MONITOR_SHADOW_JUDGE, _MODEL and MONITOR_SHADOW_SAMPLE_RATE stay allowed while
judge.shadow leaves them unset, as before judge.shadow existed. */}}
{{- $own = concat $own (list "MONITOR_JUDGE_PROVIDER" "MONITOR_JUDGE_BASE_URL" "MONITOR_JUDGE_REGION" "MONITOR_JUDGE_PROJECT" "MONITOR_JUDGE_STRUCTURED_OUTPUT" "MONITOR_SHADOW_JUDGE_PROVIDER" "MONITOR_SHADOW_JUDGE_BASE_URL") }}
{{- /* Set by the pods' env entries (clickhouseEnv, baseEnv), which win over this ConfigMap: refused, not ignored. */}}
{{- $own = concat $own (list "MONITOR_CLICKHOUSE_URL" "MONITOR_CLICKHOUSE_DATABASE" "MONITOR_CLICKHOUSE_TABLE" "MONITOR_CLICKHOUSE_USER" "MONITOR_CLICKHOUSE_CA_FILE" "MONITOR_LOG_FORMAT" "MONITOR_LOG_LEVEL") }}
{{- range $name, $value := .Values.extraSettings }}
{{- if or (has $name $own) (hasKey $written $name) }}
{{- fail (printf "extraSettings: %s has its own value in this chart; set that instead (see values.yaml)" $name) }}
{{- end }}
{{- if not (hasPrefix "MONITOR_" $name) }}
{{- fail (printf "extraSettings: %s is not a MONITOR_* setting" $name) }}
{{- end }}
{{- if or (contains "PASSWORD" $name) (contains "API_KEY" $name) }}
{{- fail (printf "extraSettings: %s is a secret; reference an existing Secret instead" $name) }}
{{- end }}
{{- end }}
{{- include "relevancy-monitor.checkSettingNames" (dict "ctx" . "where" "extraSettings" "names" (keys .Values.extraSettings | sortAlpha)) }}
{{- range $name, $value := .Values.extraSettings }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* The data of the sampling ConfigMap (the consumer's, and the migrate Job's hook copy). */}}
{{- define "relevancy-monitor.samplingData" -}}
sampling.yaml: |
  {{- toYaml .Values.sampling.rules | nindent 2 }}
{{- end }}

{{/* Annotations of a ConfigMap the migrate hook Job reads: a hook of the same events, created before the Job (a lower
weight), replaced on the next install or upgrade and removed once the hooks succeeded. */}}
{{- define "relevancy-monitor.migrateHookConfigMap" -}}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/*
The ScaledObject's maxReplicaCount: the least of autoscaling.maxReplicas, kafka.partitions and what the group's judge
quota can feed (judge.requestsPerMinute / autoscaling.minRequestsPerMinutePerReplica, at least 1).
*/}}
{{- define "relevancy-monitor.quotaReplicas" -}}
{{- $as := .Values.autoscaling }}
{{- $rpm := .Values.judge.requestsPerMinute }}
{{- if and $rpm (ne (toString $rpm) "") }}
{{- max 1 (div (int (float64 $rpm)) (int $as.minRequestsPerMinutePerReplica)) }}
{{- else }}
{{- int .Values.kafka.partitions }}
{{- end }}
{{- end }}

{{- define "relevancy-monitor.maxReplicaCount" -}}
{{- min (int .Values.autoscaling.maxReplicas) (int .Values.kafka.partitions) (int (include "relevancy-monitor.quotaReplicas" .)) }}
{{- end }}

{{- define "relevancy-monitor.maxReplicaReason" -}}
{{- $as := .Values.autoscaling }}
{{- $quota := int (include "relevancy-monitor.quotaReplicas" .) }}
{{- if and (lt $quota (int $as.maxReplicas)) (lt $quota (int .Values.kafka.partitions)) }}
{{- printf "capped by the judge quota (%v requests a minute / %d per replica; autoscaling.maxReplicas %d would leave replicas with too small a share)" .Values.judge.requestsPerMinute (int $as.minRequestsPerMinutePerReplica) (int $as.maxReplicas) }}
{{- else if lt (int .Values.kafka.partitions) (int $as.maxReplicas) }}
{{- printf "capped by the %d partitions" (int .Values.kafka.partitions) }}
{{- else }}
{{- printf "autoscaling.maxReplicas" }}
{{- end }}
{{- end }}

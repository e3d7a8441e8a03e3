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

{{/* The image reference: a version tag (the appVersion by default), never latest. */}}
{{- define "relevancy-monitor.image" -}}
{{- $tag := toString (default .Chart.AppVersion .Values.image.tag) }}
{{- if or (eq $tag "latest") (eq $tag "") }}
{{- fail "image.tag must be a version tag such as 0.1.0, not \"latest\"" }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the drain budget plus a margin. */}}
{{- define "relevancy-monitor.terminationGrace" -}}
{{- add (int (ceil .Values.shutdownGraceSeconds)) (int .Values.terminationGraceMarginSeconds) }}
{{- end }}

{{/* Whether the judge needs an API key. */}}
{{- define "relevancy-monitor.llmJudge" -}}
{{- if ne .Values.judge.method "lexical" }}true{{ end }}
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

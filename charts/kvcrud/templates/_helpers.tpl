{{/*
kvcrud.name is the chart name, or nameOverride.
*/}}
{{- define "kvcrud.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
kvcrud.fullname prefixes every resource: fullnameOverride, or release-chart (just the release
name when it already contains the chart name). Truncated to 63 characters for DNS names.
*/}}
{{- define "kvcrud.fullname" -}}
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

{{/*
kvcrud.chart is the helm.sh/chart label value: name-version.
*/}}
{{- define "kvcrud.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
kvcrud.labels are the standard labels of every resource.
*/}}
{{- define "kvcrud.labels" -}}
helm.sh/chart: {{ include "kvcrud.chart" . }}
{{ include "kvcrud.selectorLabels" . }}
{{- /* The chart's appVersion, not image.tag: a tag may hold a digest, which no label value can. */}}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kvcrud
{{- end }}

{{/*
kvcrud.selectorLabels select the release's pods; they never change after install.
*/}}
{{- define "kvcrud.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvcrud.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
kvcrud.serviceAccountName is the ServiceAccount the pods run as.
*/}}
{{- define "kvcrud.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kvcrud.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
kvcrud.image is the container image reference: repository@digest when a digest is given,
otherwise repository:tag (the chart's appVersion by default).
*/}}
{{- define "kvcrud.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (toString (.Values.image.tag | default .Chart.AppVersion)) }}
{{- end }}
{{- end }}

{{/*
kvcrud.embedded is "true" when an embedded store is on (dataStore=embedded, or an entry of
stores with driver embedded): the pod holds the data, so there is exactly one.
*/}}
{{- define "kvcrud.embedded" -}}
{{- if include "kvcrud.storesOn" . }}
{{- if include "kvcrud.embeddedStores" . }}true{{ end }}
{{- else if eq .Values.dataStore "embedded" }}true{{ end }}
{{- end }}

{{/*
kvcrud.embeddedStores names the entries of stores with driver embedded, comma-separated.
*/}}
{{- define "kvcrud.embeddedStores" -}}
{{- $names := list }}
{{- range $name, $store := .Values.stores }}
{{- if eq (toString $store.driver) "embedded" }}{{ $names = append $names (printf "stores.%s" $name) }}{{ end }}
{{- end }}
{{- join ", " $names }}
{{- end }}

{{/*
kvcrud.instanceIds is the INSTANCE_IDS value: the selected store's instance list, comma-separated.
*/}}
{{- define "kvcrud.instanceIds" -}}
{{- if include "kvcrud.embedded" . }}
{{- join "," .Values.embedded.instanceIds }}
{{- else }}
{{- join "," .Values.bigtable.instanceIds }}
{{- end }}
{{- end }}

{{/*
kvcrud.credentialsDir is where the credentials Secret is mounted.
*/}}
{{- define "kvcrud.credentialsDir" -}}
/var/run/secrets/kvcrud/gcp
{{- end }}

{{/*
kvcrud.workloadIdentity is the Google service account of the GKE Workload Identity annotation,
if any.
*/}}
{{- define "kvcrud.workloadIdentity" -}}
{{- get .Values.serviceAccount.annotations "iam.gke.io/gcp-service-account" }}
{{- end }}

{{/*
kvcrud.dataClaimName is the PersistentVolumeClaim of the embedded store's data.
*/}}
{{- define "kvcrud.dataClaimName" -}}
{{- default (printf "%s-data" (include "kvcrud.fullname" .)) .Values.embedded.persistence.existingClaim }}
{{- end }}

{{/*
kvcrud.terminationGracePeriodSeconds covers the whole stop: the preStop sleep, the drain of
in-flight requests (SHUTDOWN_TIMEOUT_MS, rounded up) and 5 s to close the store and exit.
*/}}
{{- define "kvcrud.terminationGracePeriodSeconds" -}}
{{- add .Values.shutdown.preStopSleepSeconds (div (add .Values.shutdown.timeoutMs 999) 1000) 5 }}
{{- end }}

{{/*
kvcrud.authModes is the AUTH_MODE value: auth.mode's entries, trimmed, comma-separated.
*/}}
{{- define "kvcrud.authModes" -}}
{{- $modes := list }}
{{- range splitList "," .Values.auth.mode }}
{{- $modes = append $modes (trim .) }}
{{- end }}
{{- join "," $modes }}
{{- end }}

{{/*
kvcrud.apiKeysOn is "true" when auth.mode includes apikey.
*/}}
{{- define "kvcrud.apiKeysOn" -}}
{{- if has "apikey" (splitList "," (include "kvcrud.authModes" .)) }}true{{ end }}
{{- end }}

{{/*
kvcrud.oidcOn is "true" when auth.mode includes oidc.
*/}}
{{- define "kvcrud.oidcOn" -}}
{{- if has "oidc" (splitList "," (include "kvcrud.authModes" .)) }}true{{ end }}
{{- end }}

{{/*
kvcrud.apiKeysSecretName is the Secret with the keys file: auth.apiKeys.existingSecret, or the
one the chart makes.
*/}}
{{- define "kvcrud.apiKeysSecretName" -}}
{{- .Values.auth.apiKeys.existingSecret | default (printf "%s-api-keys" (include "kvcrud.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{/*
kvcrud.oidcGrantsConfigMapName is the ConfigMap with the grants file: auth.oidc.existingConfigMap,
or the one the chart makes.
*/}}
{{- define "kvcrud.oidcGrantsConfigMapName" -}}
{{- .Values.auth.oidc.existingConfigMap | default (printf "%s-oidc-grants" (include "kvcrud.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{/*
kvcrud.apiKeysDir and kvcrud.oidcGrantsDir are where the keys Secret and the grants ConfigMap are
mounted, as whole directories: the kubelet updates such a volume when its object changes (a
subPath mount never is), and the service re-reads the file every 2 s.
*/}}
{{- define "kvcrud.apiKeysDir" -}}
/etc/kvcrud/api-keys
{{- end }}

{{- define "kvcrud.oidcGrantsDir" -}}
/etc/kvcrud/oidc-grants
{{- end }}

{{/*
kvcrud.serviceAccountTokenDir is where Kubernetes mounts the pod's API token and the cluster CA
(automountServiceAccountToken), used by auth.oidc.inCluster.
*/}}
{{- define "kvcrud.serviceAccountTokenDir" -}}
/var/run/secrets/kubernetes.io/serviceaccount
{{- end }}

{{/*
kvcrud.inClusterJwksUri is where the API server serves its service-account signing keys.
*/}}
{{- define "kvcrud.inClusterJwksUri" -}}
https://kubernetes.default.svc/openid/v1/jwks
{{- end }}

{{/*
kvcrud.oidcInCluster is "true" when the cluster's own service-account issuer is trusted
(auth.oidc.inCluster with mode oidc).
*/}}
{{- define "kvcrud.oidcInCluster" -}}
{{- if and (include "kvcrud.oidcOn" .) .Values.auth.oidc.inCluster }}true{{ end }}
{{- end }}

{{/*
kvcrud.metricsPort is METRICS_PORT: metrics.port when it is set and not 0, else empty (/metrics
on the http port).
*/}}
{{- define "kvcrud.metricsPort" -}}
{{- with .Values.metrics.port }}{{ int64 . }}{{ end }}
{{- end }}

{{/*
kvcrud.metricsPortName is the name of the container port that serves /metrics.
*/}}
{{- define "kvcrud.metricsPortName" -}}
{{- if include "kvcrud.metricsPort" . }}metrics{{ else }}http{{ end }}
{{- end }}

{{/*
kvcrud.tracingOn is "true" when tracing.otlpEndpoint is set: only then does the service start
the OpenTelemetry SDK.
*/}}
{{- define "kvcrud.tracingOn" -}}
{{- if .Values.tracing.otlpEndpoint }}true{{ end }}
{{- end }}

{{/*
kvcrud.otlpPort is the TCP port of tracing.otlpEndpoint: the URL's own, or its scheme's.
*/}}
{{- define "kvcrud.otlpPort" -}}
{{- $url := urlParse .Values.tracing.otlpEndpoint }}
{{- $port := regexFind "[0-9]+$" (regexFind ":[0-9]+$" $url.host) }}
{{- if $port }}{{ $port }}{{ else if eq $url.scheme "https" }}443{{ else }}80{{ end }}
{{- end }}

{{/*
kvcrud.serviceName is the traces' service.name: tracing.serviceName, or the release's full name.
*/}}
{{- define "kvcrud.serviceName" -}}
{{- .Values.tracing.serviceName | default (include "kvcrud.fullname" .) }}
{{- end }}

{{/*
kvcrud.resourceAttributes is OTEL_RESOURCE_ATTRIBUTES: where the pod runs (the $(POD_NAME) and
$(POD_NAMESPACE) references are expanded by the kubelet from the env entries before it), then
tracing.resourceAttributes in key order.
*/}}
{{- define "kvcrud.resourceAttributes" -}}
{{- $attributes := list "k8s.pod.name=$(POD_NAME)" "k8s.namespace.name=$(POD_NAMESPACE)" (printf "k8s.deployment.name=%s" (include "kvcrud.fullname" .)) "k8s.container.name=kvcrud" }}
{{- range $key, $value := .Values.tracing.resourceAttributes }}
{{- $attributes = append $attributes (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $attributes }}
{{- end }}

{{/*
kvcrud.durationMs is a Prometheus duration of values.schema.json's form (e.g. 30s), in
milliseconds.
*/}}
{{- define "kvcrud.durationMs" -}}
{{- $number := int64 (regexFind "^[0-9]+" .) }}
{{- $unit := regexFind "[a-z]+$" . }}
{{- mul $number (get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit) }}
{{- end }}

{{/*
kvcrud.chartEnv lists the container's environment the chart sets itself (beyond the ConfigMap):
Node's flags, the cluster CA with inCluster OIDC, and the OpenTelemetry SDK's variables.
*/}}
{{- define "kvcrud.chartEnv" -}}
{{- with .Values.nodeOptions }}
# Node's own flags (heap sizing), read by node, not by the service.
- name: NODE_OPTIONS
  value: {{ . | quote }}
{{- end }}
{{- if include "kvcrud.oidcInCluster" . }}
# Node trusts the cluster CA too, for the API server's certificate.
- name: NODE_EXTRA_CA_CERTS
  value: {{ printf "%s/ca.crt" (include "kvcrud.serviceAccountTokenDir" .) | quote }}
{{- end }}
{{- if include "kvcrud.tracingOn" . }}
{{- $tracing := .Values.tracing }}
# Tracing: the OpenTelemetry SDK's own variables, not the service's configuration.
# POD_NAME and POD_NAMESPACE come first: OTEL_RESOURCE_ATTRIBUTES refers to them.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $tracing.otlpEndpoint | quote }}
{{- with $tracing.protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
{{- with $tracing.headersSecret.existingSecret }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $tracing.headersSecret.key | quote }}
{{- end }}
{{- with $tracing.sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- if ne (toString $tracing.samplerArg) "" }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ toString $tracing.samplerArg | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ include "kvcrud.serviceName" . | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ include "kvcrud.resourceAttributes" . | quote }}
{{- end }}
{{- end }}

{{/*
kvcrud.env is the chart's environment with extraEnv merged over it by name: an extraEnv entry
takes the place of the chart's entry of the same name (so $(VAR) references keep their order),
the others follow. A name appears once: server-side apply refuses duplicate list entries.
*/}}
{{- define "kvcrud.env" -}}
{{- $extra := .Values.extraEnv | default list }}
{{- $byName := dict }}
{{- range $extra }}{{- $_ := set $byName .name . }}{{- end }}
{{- $env := list }}
{{- $replaced := list }}
{{- range (include "kvcrud.chartEnv" . | fromYamlArray) }}
  {{- if hasKey $byName .name }}
    {{- $env = append $env (get $byName .name) }}
    {{- $replaced = append $replaced .name }}
  {{- else }}
    {{- $env = append $env . }}
  {{- end }}
{{- end }}
{{- range $extra }}
  {{- if not (has .name $replaced) }}{{- $env = append $env . }}{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
kvcrud.alertSettings are the fields of an alerting rule that come from its values
(metrics.prometheusRule.alerts.NAME): for, and the severity label.
*/}}
{{- define "kvcrud.alertSettings" -}}
for: {{ .for }}
labels:
  severity: {{ .severity }}
{{- end }}

{{/*
kvcrud.runbookUrl is an alert's runbook_url, (list $ ALERT): its section of docs/operations.md,
whose heading is the alert's name.
*/}}
{{- define "kvcrud.runbookUrl" -}}
{{- $root := index . 0 }}
{{- printf "%s#%s" $root.Values.metrics.prometheusRule.runbookBaseUrl (lower (index . 1)) }}
{{- end }}

{{/*
kvcrud.defaultStoreName is the name of the store that serves v1: defaultStore, the one entry of
stores, or (without stores) the single store, which is named after its driver.
*/}}
{{- define "kvcrud.defaultStoreName" -}}
{{- if include "kvcrud.storesOn" . }}
{{- .Values.defaultStore | default (keys .Values.stores | sortAlpha | first) }}
{{- else }}
{{- .Values.dataStore }}
{{- end }}
{{- end }}

{{/*
kvcrud.testSelectorLabels select the helm test pod. Its name label is not the release pods' one,
so that no Service, PodDisruptionBudget or NetworkPolicy of the release selects it.
*/}}
{{- define "kvcrud.testSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-test" (include "kvcrud.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

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
kvcrud.embedded is "true" when the embedded store is selected.
*/}}
{{- define "kvcrud.embedded" -}}
{{- if eq .Values.dataStore "embedded" }}true{{ end }}
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

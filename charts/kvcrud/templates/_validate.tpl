{{/*
kvcrud.validateValues checks the rules between values that values.schema.json cannot express and
fails once, listing every problem, so one `helm install` tells the whole story.
*/}}
{{- define "kvcrud.validateValues" -}}
{{- $problems := list }}
{{- $v := .Values }}
{{- $embedded := include "kvcrud.embedded" . }}
{{- $workloadIdentity := include "kvcrud.workloadIdentity" . }}
{{- if not $embedded }}
  {{- if not $v.gcp.projectId }}
    {{- $problems = append $problems "gcp.projectId is required with dataStore=bigtable (the project that holds the instances)" }}
  {{- end }}
  {{- if not $v.bigtable.instanceIds }}
    {{- $problems = append $problems "bigtable.instanceIds needs at least one instance with dataStore=bigtable" }}
  {{- end }}
  {{- if and $v.credentials.existingSecret $workloadIdentity }}
    {{- $problems = append $problems "credentials.existingSecret and Workload Identity (serviceAccount.annotations iam.gke.io/gcp-service-account) are both set: choose one" }}
  {{- end }}
  {{- if and $v.credentials.existingSecret $v.bigtable.emulatorHost }}
    {{- $problems = append $problems "credentials.existingSecret is never read with bigtable.emulatorHost set: leave one empty" }}
  {{- end }}
  {{- if $v.embedded.persistence.enabled }}
    {{- $problems = append $problems "embedded.persistence.enabled only applies to dataStore=embedded" }}
  {{- end }}
{{- else }}
  {{- if gt (int $v.replicaCount) 1 }}
    {{- $problems = append $problems (printf "replicaCount is %d, but the embedded store runs in exactly one pod: set replicaCount=1" (int $v.replicaCount)) }}
  {{- end }}
  {{- if $v.autoscaling.enabled }}
    {{- $problems = append $problems "autoscaling.enabled cannot be used with dataStore=embedded (one pod only)" }}
  {{- end }}
  {{- if and $v.podDisruptionBudget.enabled (ne (toString $v.podDisruptionBudget.minAvailable) "") }}
    {{- $problems = append $problems "podDisruptionBudget.minAvailable would block every eviction of the embedded store's single pod: use maxUnavailable" }}
  {{- end }}
  {{- if $v.credentials.existingSecret }}
    {{- $problems = append $problems "credentials.existingSecret only applies to dataStore=bigtable" }}
  {{- end }}
{{- end }}
{{- if and (not $v.serviceAccount.create) $v.serviceAccount.annotations }}
  {{- $problems = append $problems "serviceAccount.annotations only apply when serviceAccount.create is true (annotate your own ServiceAccount instead)" }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
  {{- $problems = append $problems (printf "autoscaling.minReplicas (%d) is above autoscaling.maxReplicas (%d)" (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- end }}
{{- if $v.podDisruptionBudget.enabled }}
  {{- $min := ne (toString $v.podDisruptionBudget.minAvailable) "" }}
  {{- $max := ne (toString $v.podDisruptionBudget.maxUnavailable) "" }}
  {{- if eq $min $max }}
    {{- $problems = append $problems "podDisruptionBudget needs exactly one of minAvailable and maxUnavailable (set the other to \"\")" }}
  {{- end }}
{{- end }}
{{- if $problems }}
{{- fail (printf "\n\nkvcrud: invalid values:\n- %s\n" (join "\n- " $problems)) }}
{{- end }}
{{- end }}

{{/*
kvcrud.validateValues checks the rules between values that values.schema.json cannot express and
fails once, listing every problem, so one `helm install` tells the whole story.
*/}}
{{- define "kvcrud.validateValues" -}}
{{- $problems := list }}
{{- $v := .Values }}
{{- $embedded := include "kvcrud.embedded" . }}
{{- $workloadIdentity := include "kvcrud.workloadIdentity" . }}
{{- $storesOn := include "kvcrud.storesOn" . }}
{{- /* What runs the single pod, as the messages name it. */}}
{{- $onePod := ternary (printf "an embedded store (%s)" (include "kvcrud.embeddedStores" .)) "dataStore=embedded" (not (empty $storesOn)) }}
{{- if $storesOn }}
  {{- range include "kvcrud.stores.problems" . | fromYamlArray }}
    {{- $problems = append $problems . }}
  {{- end }}
  {{- if and $v.embedded.persistence.enabled (not $embedded) }}
    {{- $problems = append $problems "embedded.persistence.enabled only applies with an embedded store (an entry of stores with driver: embedded)" }}
  {{- end }}
{{- else if not $embedded }}
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
{{- else if $v.credentials.existingSecret }}
  {{- $problems = append $problems "credentials.existingSecret only applies to dataStore=bigtable" }}
{{- end }}
{{- if $embedded }}
  {{- if gt (int $v.replicaCount) 1 }}
    {{- $problems = append $problems (printf "replicaCount is %d, but %s runs in exactly one pod: set replicaCount=1" (int $v.replicaCount) (ternary "the embedded store" $onePod (empty $storesOn))) }}
  {{- end }}
  {{- if $v.autoscaling.enabled }}
    {{- $problems = append $problems (printf "autoscaling.enabled cannot be used with %s (one pod only)" $onePod) }}
  {{- end }}
  {{- if and $v.podDisruptionBudget.enabled (ne (toString $v.podDisruptionBudget.minAvailable) "") }}
    {{- $problems = append $problems "podDisruptionBudget.minAvailable would block every eviction of the embedded store's single pod: use maxUnavailable" }}
  {{- end }}
{{- end }}
{{- if gt (int64 $v.config.maxInflightPerCaller) (int64 $v.config.maxInflight) }}
  {{- $problems = append $problems (printf "config.maxInflightPerCaller (%d) is above config.maxInflight (%d): one caller cannot have more requests in flight than the pod takes" (int64 $v.config.maxInflightPerCaller) (int64 $v.config.maxInflight)) }}
{{- end }}
{{- $extraNames := list }}
{{- range $v.extraEnv }}
  {{- if has .name $extraNames }}
    {{- $problems = append $problems (printf "extraEnv names %s more than once (server-side apply refuses duplicate names)" .name) }}
  {{- end }}
  {{- $extraNames = append $extraNames .name }}
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
  {{- /* A budget that can never be met blocks every node drain. */}}
  {{- $fewest := ternary (int $v.autoscaling.minReplicas) (int $v.replicaCount) (and $v.autoscaling.enabled (not $embedded)) }}
  {{- $minAvailable := toString $v.podDisruptionBudget.minAvailable }}
  {{- if and $min (not $max) (not $embedded) (regexMatch "^[0-9]+$" $minAvailable) (ge (int $minAvailable) $fewest) }}
    {{- $problems = append $problems (printf "podDisruptionBudget.minAvailable (%s) is not below the %s (%d): no pod could ever be evicted, and node drains would hang; lower it or use maxUnavailable" $minAvailable (ternary "autoscaling.minReplicas" "replicaCount" (and $v.autoscaling.enabled (not $embedded))) $fewest) }}
  {{- end }}
  {{- if and $min (eq $minAvailable "100%") }}
    {{- $problems = append $problems "podDisruptionBudget.minAvailable 100% lets no pod be evicted, and node drains would hang; lower it or use maxUnavailable" }}
  {{- end }}
  {{- if and $max (has (toString $v.podDisruptionBudget.maxUnavailable) (list "0" "0%")) }}
    {{- $problems = append $problems "podDisruptionBudget.maxUnavailable 0 lets no pod be evicted, and node drains would hang; use 1 or more" }}
  {{- end }}
{{- end }}
{{- /* auth: the service's own rules (src/config.ts), and values of a mode that is off are refused
rather than ignored, since whoever set them believes they protect the service. */}}
{{- $auth := $v.auth }}
{{- $modes := splitList "," (include "kvcrud.authModes" .) }}
{{- range $modes }}
  {{- if not (has . (list "none" "apikey" "oidc")) }}
    {{- $problems = append $problems (printf "auth.mode entry %q is not one of none, apikey, oidc" .) }}
  {{- end }}
{{- end }}
{{- if ne (len $modes) (len (uniq $modes)) }}
  {{- $problems = append $problems "auth.mode lists a mode more than once" }}
{{- end }}
{{- if and (has "none" $modes) (gt (len $modes) 1) }}
  {{- $problems = append $problems "auth.mode cannot combine none with other modes" }}
{{- end }}
{{- $apiKeys := include "kvcrud.apiKeysOn" . }}
{{- $oidc := include "kvcrud.oidcOn" . }}
{{- if and $auth.protectDocs (not (or $apiKeys $oidc)) }}
  {{- $problems = append $problems "auth.protectDocs needs auth.mode apikey or oidc (with none there is no credential to ask for)" }}
{{- end }}
{{- if $apiKeys }}
  {{- if and $auth.apiKeys.existingSecret $auth.apiKeys.keys }}
    {{- $problems = append $problems "auth.apiKeys.keys is never used with auth.apiKeys.existingSecret set: put the keys in that Secret, or leave existingSecret empty" }}
  {{- end }}
  {{- $names := list }}
  {{- $digests := list }}
  {{- range $auth.apiKeys.keys }}
    {{- $names = append $names .name }}
    {{- $digests = append $digests (lower .sha256) }}
  {{- end }}
  {{- if ne (len $names) (len (uniq $names)) }}
    {{- $problems = append $problems "auth.apiKeys.keys repeats a name: each key needs its own" }}
  {{- end }}
  {{- if ne (len $digests) (len (uniq $digests)) }}
    {{- $problems = append $problems "auth.apiKeys.keys repeats a sha256: each key needs its own" }}
  {{- end }}
{{- else }}
  {{- if or $auth.apiKeys.existingSecret $auth.apiKeys.keys }}
    {{- $problems = append $problems "auth.apiKeys is set but auth.mode does not include apikey" }}
  {{- end }}
{{- end }}
{{- if $oidc }}
  {{- if not $auth.oidc.issuer }}
    {{- $problems = append $problems "auth.oidc.issuer is required with auth.mode oidc (the iss of the tokens to accept)" }}
  {{- end }}
  {{- if not $auth.oidc.audience }}
    {{- $problems = append $problems "auth.oidc.audience is required with auth.mode oidc (the aud the tokens must name)" }}
  {{- end }}
  {{- if and $auth.oidc.existingConfigMap $auth.oidc.grants }}
    {{- $problems = append $problems "auth.oidc.grants is never used with auth.oidc.existingConfigMap set: put the grants in that ConfigMap, or leave existingConfigMap empty" }}
  {{- end }}
{{- else }}
  {{- if or $auth.oidc.issuer $auth.oidc.jwksUri $auth.oidc.inCluster $auth.oidc.existingConfigMap $auth.oidc.grants }}
    {{- $problems = append $problems "auth.oidc is set but auth.mode does not include oidc" }}
  {{- end }}
{{- end }}
{{- /* observability: the service's rule on METRICS_PORT, and tracing values that would be ignored
without an endpoint (the SDK is not even loaded then). */}}
{{- with include "kvcrud.metricsPort" . }}
  {{- if eq (int64 .) (int64 $v.containerPort) }}
    {{- $problems = append $problems (printf "metrics.port (%s) must differ from containerPort (%d): the service serves /metrics on a listener of its own (set metrics.port to null to serve it on the http port)" . (int64 $v.containerPort)) }}
  {{- end }}
  {{- if eq (int64 .) (int64 $v.service.port) }}
    {{- $problems = append $problems (printf "metrics.port (%s) must differ from service.port (%d): the Service exposes both" . (int64 $v.service.port)) }}
  {{- end }}
{{- else }}
  {{- if $v.networkPolicy.metricsFrom }}
    {{- $problems = append $problems "networkPolicy.metricsFrom needs metrics.port: with /metrics on the http port, the scraper must be in networkPolicy.ingressFrom" }}
  {{- end }}
  {{- if and (or $v.serviceMonitor.enabled $v.podMonitoring.enabled) (ne (include "kvcrud.authModes" .) "none") }}
    {{- $problems = append $problems "serviceMonitor and podMonitoring need metrics.port when auth.mode is not none: on the http port /metrics needs a credential, which the scrapers do not send" }}
  {{- end }}
{{- end }}
{{- $tracing := $v.tracing }}
{{- if not (include "kvcrud.tracingOn" .) }}
  {{- $unused := list }}
  {{- range $name := list "protocol" "sampler" "serviceName" "resourceAttributes" }}
    {{- if get $tracing $name }}
      {{- $unused = append $unused (printf "tracing.%s" $name) }}
    {{- end }}
  {{- end }}
  {{- if ne (toString $tracing.samplerArg) "" }}
    {{- $unused = append $unused "tracing.samplerArg" }}
  {{- end }}
  {{- if $tracing.headersSecret.existingSecret }}
    {{- $unused = append $unused "tracing.headersSecret.existingSecret" }}
  {{- end }}
  {{- if $v.networkPolicy.tracingTo }}
    {{- $unused = append $unused "networkPolicy.tracingTo" }}
  {{- end }}
  {{- if $unused }}
    {{- $problems = append $problems (printf "%s %s set but tracing.otlpEndpoint is empty: tracing starts only with an endpoint" (join ", " $unused) (ternary "is" "are" (eq (len $unused) 1))) }}
  {{- end }}
{{- else if and (ne (toString $tracing.samplerArg) "") (not (has $tracing.sampler (list "traceidratio" "parentbased_traceidratio"))) }}
  {{- $problems = append $problems (printf "tracing.samplerArg is only read by tracing.sampler traceidratio or parentbased_traceidratio, not %q" ($tracing.sampler | default "(the default) parentbased_always_on")) }}
{{- end }}
{{- range $name, $monitor := dict "serviceMonitor" (list $v.serviceMonitor.scrapeTimeout $v.serviceMonitor.interval "scrapeTimeout") "podMonitoring" (list $v.podMonitoring.timeout $v.podMonitoring.interval "timeout") }}
  {{- $timeout := index $monitor 0 }}
  {{- $interval := index $monitor 1 }}
  {{- if gt (int64 (include "kvcrud.durationMs" $timeout)) (int64 (include "kvcrud.durationMs" $interval)) }}
    {{- $problems = append $problems (printf "%s.%s (%s) is longer than %s.interval (%s)" $name (index $monitor 2) $timeout $name $interval) }}
  {{- end }}
{{- end }}
{{- /* helm test: its credential is an API key, so a mode without apikey leaves it none to send. */}}
{{- $testKey := $v.tests.apiKey.existingSecret }}
{{- if $v.tests.enabled }}
  {{- if and (not (or $apiKeys $oidc)) $testKey }}
    {{- $problems = append $problems "tests.apiKey.existingSecret is never sent with auth.mode none: leave it empty" }}
  {{- else if and $oidc (not $apiKeys) }}
    {{- $problems = append $problems (printf "tests.enabled needs auth.mode none or one with apikey (not %s): the test pod sends an API key (tests.apiKey)" $auth.mode) }}
  {{- else if and $apiKeys (not $testKey) }}
    {{- $problems = append $problems (printf "tests.apiKey.existingSecret is required with tests.enabled and auth.mode %s: a Secret holding a key with a role on the default store (%s)" $auth.mode (include "kvcrud.defaultStoreName" .)) }}
  {{- end }}
{{- else if $testKey }}
  {{- $problems = append $problems "tests.apiKey.existingSecret is set but tests.enabled is false" }}
{{- end }}
{{- if $problems }}
{{- fail (printf "\n\nkvcrud: invalid values:\n- %s\n" (join "\n- " $problems)) }}
{{- end }}
{{- end }}

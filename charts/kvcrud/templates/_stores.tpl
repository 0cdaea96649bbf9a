{{/*
The stores map (values `stores` and `defaultStore`), rendered into the service's STORES_FILE.

Each driver the chart knows defines four templates, called with
(dict "name" STORE-NAME "store" ENTRY "root" $):
- kvcrud.stores.DRIVER.problems: a YAML list of what is wrong with the entry (beyond the schema),
  each naming the entry (stores.NAME.FIELD);
- kvcrud.stores.DRIVER.entry: the entry's driver settings in STORES_FILE, as YAML (driver and
  instances are added by kvcrud.storesFile);
- kvcrud.stores.DRIVER.secrets: a YAML list of the Secrets the store reads files from, each
  {secretName, key}; each is mounted read-only at kvcrud.stores.secretPath, and the entry points
  its setting there. Credentials never go into STORES_FILE itself;
- kvcrud.stores.DRIVER.describe: what the install notes say of the store, after its instances.
Adding a driver: its name in kvcrud.stores.drivers, these four templates, and its entry's
fields in values.schema.json (one if/then block under definitions.store).
*/}}

{{/*
kvcrud.stores.drivers lists the drivers a stores entry may name, separated by spaces.
*/}}
{{- define "kvcrud.stores.drivers" -}}
bigtable embedded redis spanner
{{- end }}

{{/*
kvcrud.storesOn is "true" when the stores map is used (it is not empty).
*/}}
{{- define "kvcrud.storesOn" -}}
{{- if .Values.stores }}true{{ end }}
{{- end }}

{{/*
kvcrud.storesFileDir is where the STORES_FILE ConfigMap is mounted, as a whole directory.
*/}}
{{- define "kvcrud.storesFileDir" -}}
/etc/kvcrud/stores
{{- end }}

{{- define "kvcrud.storesConfigMapName" -}}
{{- printf "%s-stores" (include "kvcrud.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
kvcrud.stores.secretPath is the file a store reads from one of its Secrets:
(dict "name" STORE-NAME "secretName" SECRET "key" KEY).
*/}}
{{- define "kvcrud.stores.secretPath" -}}
{{- printf "/var/run/secrets/kvcrud/stores/%s/%s/%s" .name .secretName .key }}
{{- end }}

{{/*
kvcrud.stores.secretMounts is a YAML list of every Secret the stores read, each {volume, name,
secretName, key, dir}, for the Deployment's volumes and volumeMounts.
*/}}
{{- define "kvcrud.stores.secretMounts" -}}
{{- $mounts := list }}
{{- range $name, $store := .Values.stores }}
{{- if has (toString $store.driver) (splitList " " (include "kvcrud.stores.drivers" $)) }}
{{- range $index, $secret := include (printf "kvcrud.stores.%s.secrets" $store.driver) (dict "name" $name "store" $store "root" $) | fromYamlArray }}
{{- $mounts = append $mounts (dict "volume" (printf "store-%s-%d" $name $index) "name" $name "secretName" $secret.secretName "key" $secret.key "dir" (dir (include "kvcrud.stores.secretPath" (dict "name" $name "secretName" $secret.secretName "key" $secret.key)))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $mounts }}
{{- end }}

{{/*
kvcrud.storesFile is the content of STORES_FILE: every entry of `stores` with its driver,
instances and the settings its driver template renders, and the default.
*/}}
{{- define "kvcrud.storesFile" -}}
{{- $stores := dict }}
{{- range $name, $store := .Values.stores }}
{{- $entry := include (printf "kvcrud.stores.%s.entry" $store.driver) (dict "name" $name "store" $store "root" $) | fromYaml }}
{{- $_ := set $entry "driver" $store.driver }}
{{- $_ = set $entry "instances" $store.instances }}
{{- $_ = set $stores $name $entry }}
{{- end }}
{{- $file := dict "stores" $stores }}
{{- with .Values.defaultStore }}
{{- $_ := set $file "default" . }}
{{- end }}
{{- toYaml $file }}
{{- end }}

{{/*
kvcrud.stores.problems is a YAML list of what is wrong with the stores map: names, the default,
each entry (by its driver), and single-store values set beside it.
*/}}
{{- define "kvcrud.stores.problems" -}}
{{- $problems := list }}
{{- $v := .Values }}
{{- $drivers := splitList " " (include "kvcrud.stores.drivers" .) }}
{{- $names := keys $v.stores | sortAlpha }}
{{- range $name := $names }}
  {{- $store := get $v.stores $name }}
  {{- if not (regexMatch "^[a-z0-9-]{1,32}$" $name) }}
    {{- $problems = append $problems (printf "stores.%s is not a valid store name (1-32 characters: lowercase letters, digits and hyphens)" $name) }}
  {{- end }}
  {{- if not (has (toString $store.driver) $drivers) }}
    {{- $problems = append $problems (printf "stores.%s.driver must be one of %s" $name (join ", " $drivers)) }}
  {{- else }}
    {{- if not $store.instances }}
      {{- $problems = append $problems (printf "stores.%s.instances needs at least one instance" $name) }}
    {{- end }}
    {{- range include (printf "kvcrud.stores.%s.problems" $store.driver) (dict "name" $name "store" $store "root" $) | fromYamlArray }}
      {{- $problems = append $problems . }}
    {{- end }}
  {{- end }}
{{- end }}
{{- if $v.defaultStore }}
  {{- if not (hasKey $v.stores $v.defaultStore) }}
    {{- $problems = append $problems (printf "defaultStore %q is not an entry of stores: name one of %s" $v.defaultStore (join ", " $names)) }}
  {{- end }}
{{- else if gt (len $names) 1 }}
  {{- $problems = append $problems (printf "defaultStore is required with more than one store: name the one that serves v1, one of %s" (join ", " $names)) }}
{{- end }}
{{- /* The single-store values would be ignored: say where each goes instead. */}}
{{- if ne $v.dataStore "bigtable" }}
  {{- $problems = append $problems (printf "dataStore=%s is for a single store: with stores, give the store an entry with driver: %s" $v.dataStore $v.dataStore) }}
{{- end }}
{{- range $value, $field := dict "gcp.projectId" (list $v.gcp.projectId "projectId") "bigtable.instanceIds" (list $v.bigtable.instanceIds "instances") "bigtable.emulatorHost" (list $v.bigtable.emulatorHost "emulatorHost") "credentials.existingSecret" (list $v.credentials.existingSecret "credentials.existingSecret") "embedded.instanceIds" (list $v.embedded.instanceIds "instances") }}
  {{- if index $field 0 }}
    {{- $problems = append $problems (printf "%s is for a single store: with stores, set it in the store's entry (stores.NAME.%s)" $value (index $field 1)) }}
  {{- end }}
{{- end }}
{{- toYaml $problems }}
{{- end }}

{{/*
The bigtable driver: Cloud Bigtable (or its emulator) in projectId. Credentials: Workload
Identity (application default credentials), or a key file from a Secret (credentials).
*/}}
{{- define "kvcrud.stores.bigtable.problems" -}}
{{- $problems := list }}
{{- $store := .store }}
{{- if not $store.projectId }}
  {{- $problems = append $problems (printf "stores.%s.projectId is required with driver bigtable (the project that holds the instances)" .name) }}
{{- end }}
{{- if and $store.emulatorHost $store.credentials $store.credentials.existingSecret }}
  {{- $problems = append $problems (printf "stores.%s.credentials.existingSecret is never read with stores.%s.emulatorHost set: leave one empty" .name .name) }}
{{- end }}
{{- toYaml $problems }}
{{- end }}

{{- define "kvcrud.stores.bigtable.entry" -}}
{{- $entry := dict "projectId" .store.projectId }}
{{- with .store.emulatorHost }}
{{- $_ := set $entry "emulatorHost" . }}
{{- end }}
{{- with include "kvcrud.stores.bigtable.secrets" . | fromYamlArray }}
{{- $secret := first . }}
{{- $_ := set $entry "credentialsFile" (include "kvcrud.stores.secretPath" (dict "name" $.name "secretName" $secret.secretName "key" $secret.key)) }}
{{- end }}
{{- if kindIs "bool" .store.coalesce }}
{{- $_ := set $entry "coalesce" .store.coalesce }}
{{- end }}
{{- toYaml $entry }}
{{- end }}

{{- define "kvcrud.stores.bigtable.describe" -}}
project {{ .store.projectId }}
{{- if .store.emulatorHost }}, emulator at {{ .store.emulatorHost }}
{{- else if and .store.credentials .store.credentials.existingSecret }}, key file from the Secret {{ .store.credentials.existingSecret }}
{{- else if include "kvcrud.workloadIdentity" .root }}, as {{ include "kvcrud.workloadIdentity" .root }} (Workload Identity)
{{- else }}, with the node's default credentials
{{- end }}
{{- end }}

{{- define "kvcrud.stores.bigtable.secrets" -}}
{{- $secrets := list }}
{{- with .store.credentials }}
{{- if .existingSecret }}
{{- $secrets = append $secrets (dict "secretName" .existingSecret "key" (.key | default "credentials.json")) }}
{{- end }}
{{- end }}
{{- toYaml $secrets }}
{{- end }}

{{/*
The embedded driver: a SQLite database in the pod, in its own subdirectory (named after the
store) of the data volume at embedded.dataDir. One pod only (see kvcrud.embedded).
*/}}
{{- define "kvcrud.stores.embedded.problems" -}}
{{- toYaml list }}
{{- end }}

{{- define "kvcrud.stores.embedded.entry" -}}
{{- toYaml (dict "dataDir" (printf "%s/%s" (trimSuffix "/" .root.Values.embedded.dataDir) .name)) }}
{{- end }}

{{- define "kvcrud.stores.embedded.describe" -}}
data in {{ (include "kvcrud.stores.embedded.entry" . | fromYaml).dataDir }}
{{- end }}

{{- define "kvcrud.stores.embedded.secrets" -}}
{{- toYaml list }}
{{- end }}

{{/*
The redis driver: Memorystore for Redis (or Redis Cluster) at url. Its AUTH string and the
server's CA come from Secrets (authString, ca), mounted as files; STORES_FILE names the files.
*/}}
{{- define "kvcrud.stores.redis.problems" -}}
{{- $problems := list }}
{{- $store := .store }}
{{- $url := toString ($store.url | default "") }}
{{- if not $url }}
  {{- $problems = append $problems (printf "stores.%s.url is required with driver redis (redis://host:port or rediss://host:port)" .name) }}
{{- else if not (regexMatch "^rediss?://[^/@]+(/[0-9]{1,2})?/?$" $url) }}
  {{- if regexMatch "^rediss?://[^/]*:[^/]*@" $url }}
    {{- $problems = append $problems (printf "stores.%s.url must not hold a password: put the AUTH string in a Secret and name it in stores.%s.authString.existingSecret" .name .name) }}
  {{- else }}
    {{- $problems = append $problems (printf "stores.%s.url must be redis://host:port or rediss://host:port, with at most a database number, got %q" .name $url) }}
  {{- end }}
{{- end }}
{{- if and $store.ca $store.ca.existingSecret (not (hasPrefix "rediss://" $url)) }}
  {{- $problems = append $problems (printf "stores.%s.ca needs a rediss:// url: the CA is for TLS (in-transit encryption)" .name) }}
{{- end }}
{{- if and $store.cluster (regexMatch "/[0-9]+/?$" $url) }}
  {{- $problems = append $problems (printf "stores.%s.url of a cluster cannot name a database: a Redis Cluster has only database 0" .name) }}
{{- end }}
{{- toYaml $problems }}
{{- end }}

{{- define "kvcrud.stores.redis.entry" -}}
{{- $entry := dict "url" .store.url }}
{{- if .store.cluster }}
{{- $_ := set $entry "cluster" true }}
{{- end }}
{{- with .store.authString }}
{{- if .existingSecret }}
{{- $_ := set $entry "authStringFile" (include "kvcrud.stores.secretPath" (dict "name" $.name "secretName" .existingSecret "key" (.key | default "auth"))) }}
{{- end }}
{{- end }}
{{- with .store.ca }}
{{- if .existingSecret }}
{{- $_ := set $entry "caFile" (include "kvcrud.stores.secretPath" (dict "name" $.name "secretName" .existingSecret "key" (.key | default "server-ca.pem"))) }}
{{- end }}
{{- end }}
{{- toYaml $entry }}
{{- end }}

{{- define "kvcrud.stores.redis.describe" -}}
{{ ternary "Redis Cluster" "Redis" (eq (toString .store.cluster) "true") }} at {{ .store.url }}
{{- if and .store.authString .store.authString.existingSecret }}, AUTH string from the Secret {{ .store.authString.existingSecret }}{{ end }}
{{- if and .store.ca .store.ca.existingSecret }}, CA from the Secret {{ .store.ca.existingSecret }}{{ end }}
{{- end }}

{{- define "kvcrud.stores.redis.secrets" -}}
{{- $secrets := list }}
{{- with .store.authString }}
{{- if .existingSecret }}
{{- $secrets = append $secrets (dict "secretName" .existingSecret "key" (.key | default "auth")) }}
{{- end }}
{{- end }}
{{- with .store.ca }}
{{- if .existingSecret }}
{{- $secrets = append $secrets (dict "secretName" .existingSecret "key" (.key | default "server-ca.pem")) }}
{{- end }}
{{- end }}
{{- toYaml $secrets }}
{{- end }}

{{/*
The spanner driver: Cloud Spanner (or its emulator), the Spanner instance `instance` in projectId;
each kvcrud instance is the database of the same ID in it. Credentials: Workload Identity
(application default credentials), or a key file from a Secret (credentials).
*/}}
{{- define "kvcrud.stores.spanner.problems" -}}
{{- $problems := list }}
{{- $store := .store }}
{{- if not $store.projectId }}
  {{- $problems = append $problems (printf "stores.%s.projectId is required with driver spanner (the project that holds the Spanner instance)" .name) }}
{{- end }}
{{- if not $store.instance }}
  {{- $problems = append $problems (printf "stores.%s.instance is required with driver spanner (the Spanner instance that holds the instances' databases)" .name) }}
{{- end }}
{{- if and $store.emulatorHost $store.credentials $store.credentials.existingSecret }}
  {{- $problems = append $problems (printf "stores.%s.credentials.existingSecret is never read with stores.%s.emulatorHost set: leave one empty" .name .name) }}
{{- end }}
{{- toYaml $problems }}
{{- end }}

{{- define "kvcrud.stores.spanner.entry" -}}
{{- $entry := dict "projectId" .store.projectId "instance" .store.instance }}
{{- with .store.emulatorHost }}
{{- $_ := set $entry "emulatorHost" . }}
{{- end }}
{{- with include "kvcrud.stores.spanner.secrets" . | fromYamlArray }}
{{- $secret := first . }}
{{- $_ := set $entry "credentialsFile" (include "kvcrud.stores.secretPath" (dict "name" $.name "secretName" $secret.secretName "key" $secret.key)) }}
{{- end }}
{{- if kindIs "bool" .store.coalesce }}
{{- $_ := set $entry "coalesce" .store.coalesce }}
{{- end }}
{{- toYaml $entry }}
{{- end }}

{{- define "kvcrud.stores.spanner.describe" -}}
project {{ .store.projectId }}, Spanner instance {{ .store.instance }}
{{- if .store.emulatorHost }}, emulator at {{ .store.emulatorHost }}
{{- else if and .store.credentials .store.credentials.existingSecret }}, key file from the Secret {{ .store.credentials.existingSecret }}
{{- else if include "kvcrud.workloadIdentity" .root }}, as {{ include "kvcrud.workloadIdentity" .root }} (Workload Identity)
{{- else }}, with the node's default credentials
{{- end }}
{{- end }}

{{- define "kvcrud.stores.spanner.secrets" -}}
{{- $secrets := list }}
{{- with .store.credentials }}
{{- if .existingSecret }}
{{- $secrets = append $secrets (dict "secretName" .existingSecret "key" (.key | default "credentials.json")) }}
{{- end }}
{{- end }}
{{- toYaml $secrets }}
{{- end }}

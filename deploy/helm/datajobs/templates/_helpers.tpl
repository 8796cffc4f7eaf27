{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "datajobs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: release-chart unless the release name already holds the chart name. */}}
{{- define "datajobs.fullname" -}}
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

{{- define "datajobs.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "datajobs.labels" -}}
helm.sh/chart: {{ include "datajobs.chart" . }}
{{ include "datajobs.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: datajobs
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "datajobs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "datajobs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "datajobs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "datajobs.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace of the CronJobs, Jobs and Pods of data jobs: <release namespace>-jobs unless set. */}}
{{- define "datajobs.jobsNamespace" -}}
{{- default (printf "%s-jobs" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.jobsNamespace }}
{{- end }}

{{/* The namespaces of data jobs in this cluster, as a JSON list: the jobs namespace first,
then each local execution target's (`targets`), none twice. */}}
{{- define "datajobs.jobsNamespaces" -}}
{{- $all := list (include "datajobs.jobsNamespace" .) }}
{{- range .Values.targets }}
{{- if has .namespace $all }}
{{- fail (printf "targets: %s's namespace %s is the jobs namespace or another target's" .name .namespace) }}
{{- end }}
{{- $all = append $all .namespace }}
{{- end }}
{{- toJson $all }}
{{- end }}

{{/* The scope of the bindings of the policies on teams' pods: the pods of a team in the
jobs namespace and, with `targets`, in each local target's, each checked against the
ConfigMap datajobs-profiles of its own namespace, which that namespace's shard keeps. */}}
{{- define "datajobs.teamPodsScope" -}}
paramRef:
  name: datajobs-profiles
  {{- if not .Values.targets }}
  namespace: {{ include "datajobs.jobsNamespace" . | quote }}
  {{- end }}
  parameterNotFoundAction: Deny
matchResources:
  namespaceSelector:
    {{- if .Values.targets }}
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values: {{ include "datajobs.jobsNamespaces" . }}
    {{- else }}
    matchLabels:
      kubernetes.io/metadata.name: {{ include "datajobs.jobsNamespace" . | quote }}
    {{- end }}
  objectSelector:
    matchExpressions:
      - {key: datajobs.io/team, operator: Exists}
{{- end }}

{{/* The name of the cluster-wide objects of this release (admission policy, binding). */}}
{{- define "datajobs.clusterName" -}}
{{- printf "%s.%s" .Release.Namespace (include "datajobs.fullname" .) }}
{{- end }}

{{/* A memory quantity of values (1Gi, 512M, 1073741824) in bytes. */}}
{{- define "datajobs.bytes" -}}
{{- $q := toString . }}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 }}
{{- $n := regexFind "^[0-9]+" $q }}
{{- $unit := trimPrefix $n $q }}
{{- if not $n }}
{{- fail (printf "resources.limits.memory %q: a whole number of bytes, Ki, Mi, Gi, Ti, k, M, G or T" $q) }}
{{- else if eq $unit "" }}
{{- $n }}
{{- else if hasKey $units $unit }}
{{- mul (int64 $n) (get $units $unit) }}
{{- else }}
{{- fail (printf "resources.limits.memory %q: a whole number of bytes, Ki, Mi, Gi, Ti, k, M, G or T" $q) }}
{{- end }}
{{- end }}

{{- define "datajobs.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* An environment value: lists join with commas (the CLI's list syntax), the rest as strings. */}}
{{- define "datajobs.envValue" -}}
{{- if kindIs "slice" . }}{{ join "," . | quote }}{{ else if kindIs "map" . }}{{ fail "config values must be scalars or lists" }}{{ else }}{{ toString . | quote }}{{ end }}
{{- end }}

{{/* --base-image: version=image pairs, sorted by version. */}}
{{- define "datajobs.baseImages" -}}
{{- $pairs := list }}
{{- range $version, $image := . }}
{{- $pairs = append $pairs (printf "%s=%s" $version $image) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

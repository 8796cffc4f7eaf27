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

{{/* The namespace of the CronJobs, Jobs and Pods of data jobs: the release's unless set. */}}
{{- define "datajobs.jobsNamespace" -}}
{{- default .Release.Namespace .Values.jobsNamespace }}
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

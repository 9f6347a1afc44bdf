{{- define "gantry.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gantry.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gantry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gantry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gantry.labels" -}}
{{ include "gantry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gantry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gantry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Namespace of the binding ConfigMaps. */}}
{{- define "gantry.bindingsNamespace" -}}
{{- default .Release.Namespace .Values.bindingsNamespace -}}
{{- end -}}

{{/* API group of an apiVersion: "" for "v1", "apps" for "apps/v1". */}}
{{- define "gantry.apiGroup" -}}
{{- if contains "/" . -}}{{ first (splitList "/" .) }}{{- end -}}
{{- end -}}

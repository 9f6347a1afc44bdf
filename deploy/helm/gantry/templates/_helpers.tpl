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

{{/* The Secret in which the operator keeps the webhook's certificates,
when policies.certSecret does not name one of yours. */}}
{{- define "gantry.webhookCertSecret" -}}
{{ include "gantry.fullname" . }}-webhook-cert
{{- end -}}

{{/* Whether the operator generates and rotates the webhook's certificates. */}}
{{- define "gantry.generatesWebhookCert" -}}
{{- if and .Values.policies.enabled (not .Values.policies.certSecret) }}true{{ end -}}
{{- end -}}

{{/* Namespace of the binding ConfigMaps. */}}
{{- define "gantry.bindingsNamespace" -}}
{{- default .Release.Namespace .Values.bindingsNamespace -}}
{{- end -}}

{{/* API group of an apiVersion: "" for "v1", "apps" for "apps/v1". */}}
{{- define "gantry.apiGroup" -}}
{{- if contains "/" . -}}{{ first (splitList "/" .) }}{{- end -}}
{{- end -}}

{{/* The container image: pinned by digest when image.digest is set. */}}
{{- define "gantry.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Events on parents and binding ConfigMaps: created, and patched when the
recorder folds a repeat into a series. */}}
{{- define "gantry.eventRules" -}}
- apiGroups: [events.k8s.io, ""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/*
The rules for the bindings' kinds (parents, children, related): rbac.rules
verbatim when given (e.g. the output of `gantry rbac --helm-values`), else
derived from values.bindings. A ClusterRole holds them, or with
watchNamespaces a Role in each watched namespace.
*/}}
{{- define "gantry.bindingRules" -}}
{{- if .Values.rbac.rules -}}
# rbac.rules
{{ toYaml .Values.rbac.rules }}
{{- else -}}
{{- range $name, $b := .Values.bindings }}
{{- $parent := required (printf "bindings.%s.parent is required" $name) $b.parent }}
{{- $pg := include "gantry.apiGroup" (required (printf "bindings.%s.parent.apiVersion is required" $name) $parent.apiVersion) }}
{{- $pr := required (printf "bindings.%s.parent.resource is required" $name) $parent.resource }}
# binding {{ $name }}: parent {{ $parent.kind }}
- apiGroups: [{{ $pg | quote }}]
  resources: [{{ $pr }}]
  verbs: [get, list, watch, patch]
- apiGroups: [{{ $pg | quote }}]
  resources: [{{ $pr }}/status]
  verbs: [patch]
- apiGroups: [{{ $pg | quote }}]
  resources: [{{ $pr }}/finalizers]
  verbs: [update]
{{- range $b.children }}
# binding {{ $name }}: child {{ .kind }}
- apiGroups: [{{ include "gantry.apiGroup" .apiVersion | quote }}]
  resources: [{{ required (printf "bindings.%s: %s needs resource, its plural" $name .kind) .resource }}]
  verbs: [get, list, watch, create, patch, delete]
{{- end }}
{{- range $b.related }}
# binding {{ $name }}: related {{ .kind }}
- apiGroups: [{{ include "gantry.apiGroup" .apiVersion | quote }}]
  resources: [{{ required (printf "bindings.%s: %s needs resource, its plural" $name .kind) .resource }}]
  verbs: [get, list, watch]
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

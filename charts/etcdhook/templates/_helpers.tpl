{{/*
Names are fixed, not derived from the release: the CRD, the CompositeController and the admission policy
are cluster-wide, so a cluster holds one etcdhook, and the chart's objects keep the names of manifests/
(the chart's README says how to move from `kubectl apply -k manifests/` to the chart).
*/}}

{{/* Pod labels and the selector: as manifests/deployment.yaml (a Deployment's selector is immutable). */}}
{{- define "etcdhook.selectorLabels" -}}
app.kubernetes.io/name: etcdhook
app.kubernetes.io/component: hook
{{- end }}

{{/* Labels of every object the chart renders (not of the hook's pods: a chart upgrade must not roll them). */}}
{{- define "etcdhook.labels" -}}
app.kubernetes.io/name: etcdhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "etcdhook.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The objects of a YAML file of the repository (files/ links into manifests/ and metacontroller/, so the
chart cannot drift from them), each with the chart's labels added, extra labels, and a namespace if one
is given. Arguments: dict "ctx" $ "path" "files/..." ["namespace" NS] ["labels" DICT] ["annotations" DICT].
*/}}
{{- define "etcdhook.fromFile" -}}
{{- $ctx := .ctx -}}
{{- $content := $ctx.Files.Get .path -}}
{{- if not $content -}}
{{- fail (printf "charts/etcdhook/%s is missing or empty: it links into the repository's manifests" .path) -}}
{{- end -}}
{{- $args := . -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $content -1 }}
{{- $obj := fromYaml $doc }}
{{- if hasKey $obj "Error" }}
{{- fail (printf "%s: %s" $args.path $obj.Error) }}
{{- end }}
{{- if $obj.kind }}
{{- $meta := $obj.metadata | default dict }}
{{- $labels := merge (include "etcdhook.labels" $ctx | fromYaml) ($args.labels | default dict) ($meta.labels | default dict) }}
{{- $_ := set $meta "labels" $labels }}
{{- with $args.annotations }}
{{- $_ := set $meta "annotations" (merge (deepCopy .) ($meta.annotations | default dict)) }}
{{- end }}
{{- with $args.namespace }}
{{- $_ := set $meta "namespace" . }}
{{- end }}
{{- $_ := set $obj "metadata" $meta }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{- define "labels" -}}
app.kubernetes.io/name: shop
app.kubernetes.io/instance: {{ .package.metadata.name }}
{{- end -}}

{{- define "hosted-addon.labels" -}}
app.kubernetes.io/name: hosted-addon
app.kubernetes.io/instance: {{ .package.metadata.name }}
{{- end -}}

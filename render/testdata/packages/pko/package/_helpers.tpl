{{- define "name" }}{{ .package.metadata.name }}-app{{ end -}}

{{/*
Names and labels, shaped after upstream Karpenter's chart
(aws/karpenter-provider-aws, charts/karpenter/templates/_helpers.tpl).
*/}}

{{/* The app name: the chart's unless nameOverride. DNS labels end at 63 characters. */}}
{{- define "karpenter-tui.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name. A release called karpenter-tui (or anything containing it) gives
"karpenter-tui", the names deploy/ uses; another release is prefixed to it.
*/}}
{{- define "karpenter-tui.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "karpenter-tui.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The labels that pick the controller's pods: the Deployment's selector, the PDB's, the
Service's, the ServiceMonitor's and the spread constraints'. They never change between
upgrades (a Deployment's selector is immutable).
*/}}
{{- define "karpenter-tui.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter-tui.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Every object's labels: the selector's plus the chart, version and manager. */}}
{{- define "karpenter-tui.labels" -}}
{{ include "karpenter-tui.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the controller runs as (and the bindings name). */}}
{{- define "karpenter-tui.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "karpenter-tui.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/* repository:tag, tag defaulting to appVersion, @digest when one is given. */}}
{{- define "karpenter-tui.image" -}}
{{- $img := .Values.controller.image }}
{{- $ref := printf "%s:%s" $img.repository ($img.tag | default .Chart.AppVersion) }}
{{- if $img.digest }}
{{- $ref = printf "%s@%s" $ref $img.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
FEATURE_GATES as upstream's chart builds it (Name=bool,...), from the five gates this
controller knows; values.schema.json refuses any other, because the binary does.
*/}}
{{- define "karpenter-tui.featureGates" -}}
{{- $g := .Values.settings.featureGates }}
{{- printf "SpotToSpotConsolidation=%t,NodeRepair=%t,ReservedCapacity=%t,NodeOverlay=%t,StaticCapacity=%t" $g.spotToSpotConsolidation $g.nodeRepair $g.reservedCapacity $g.nodeOverlay $g.staticCapacity }}
{{- end }}

{{/*
The settings as the container's environment, under upstream's variable names: a YAML
list. nil and "" leave a variable out, so the controller's own default applies; false
and 0 are values and are set. FEATURE_GATES is always set, as upstream's chart does.
*/}}
{{- define "karpenter-tui.settingsEnv" -}}
{{- $s := .Values.settings }}
{{- $env := list }}
{{- range list
      (list "CLUSTER_NAME" $s.clusterName)
      (list "CLUSTER_ENDPOINT" $s.clusterEndpoint)
      (list "INTERRUPTION_QUEUE" $s.interruptionQueue)
      (list "ISOLATED_VPC" $s.isolatedVPC)
      (list "RESERVED_ENIS" $s.reservedENIs)
      (list "VM_MEMORY_OVERHEAD_PERCENT" $s.vmMemoryOverheadPercent)
      (list "BATCH_MAX_DURATION" $s.batchMaxDuration)
      (list "BATCH_IDLE_DURATION" $s.batchIdleDuration)
      (list "PREFERENCE_POLICY" $s.preferencePolicy)
      (list "MIN_VALUES_POLICY" $s.minValuesPolicy)
      (list "FEATURE_GATES" (include "karpenter-tui.featureGates" $))
      (list "LOG_LEVEL" $.Values.logLevel) }}
{{- $value := index . 1 }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- $env = append $env (dict "name" (index . 0) "value" (toString $value)) }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* The spread constraints, each without a labelSelector given this release's pods'. */}}
{{- define "karpenter-tui.topologySpreadConstraints" -}}
{{- $spread := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "karpenter-tui.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $spread = append $spread $c }}
{{- end }}
{{- toYaml $spread }}
{{- end }}

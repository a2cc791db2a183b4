{{/*
Named templates shared by every manifest of the chart (TLS ones in _tls.tpl). Kept to Go
text/template builtins, sprig (genCAWithKey, genSignedCertWithKey, buildCustomCert for TLS),
include, tpl, required, lookup, toYaml, fromYaml, toJson and fromJsonArray (the functions the
project's renderer implements; docs/kubernetes.md).
*/}}

{{/* The chart's name: app.kubernetes.io/name (tools/kubectl-dfcache selects on it). */}}
{{- define "dragonfly-csi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's base name for every object. Truncated to 42 characters so that the longest
suffix ("-scheduler-headless", "-redis-headless" plus a StatefulSet ordinal) still fits a
63-character DNS label.
*/}}
{{- define "dragonfly-csi.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dragonfly-csi.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels a selector uses; call with (dict "ctx" $ "component" "dfdaemon"). */}}
{{- define "dragonfly-csi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dragonfly-csi.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Every object's labels; call with (dict "ctx" $ "component" "dfdaemon"). */}}
{{- define "dragonfly-csi.labels" -}}
{{ include "dragonfly-csi.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: dragonfly-csi
helm.sh/chart: {{ include "dragonfly-csi.chart" .ctx }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The project image (dfdaemon, dfcache, csi-plugin, scheduler); the tag defaults to appVersion. */}}
{{- define "dragonfly-csi.image" -}}
{{- printf "%s:%s" (required "image.repository is required" .Values.image.repository) (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}

{{/* A sidecar or Redis image from a {repository, tag} value. */}}
{{- define "dragonfly-csi.sidecarImage" -}}
{{- printf "%s:%s" (required "an image repository is required" .repository) (required (printf "the tag of %s is required" .repository) .tag | toString) -}}
{{- end -}}

{{- define "dragonfly-csi.nodeServiceAccountName" -}}
{{- if .Values.node.serviceAccount.create -}}
{{- default (printf "%s-node" (include "dragonfly-csi.fullname" .)) .Values.node.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.node.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dragonfly-csi.schedulerServiceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create -}}
{{- default (printf "%s-scheduler" (include "dragonfly-csi.fullname" .)) .Values.scheduler.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.scheduler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Paths on the node derived from kubeletDir and the driver name. */}}
{{- define "dragonfly-csi.kubeletDir" -}}
{{- required "kubeletDir is required" .Values.kubeletDir | trimSuffix "/" -}}
{{- end -}}

{{- define "dragonfly-csi.driverName" -}}
{{- required "csi.driverName is required" .Values.csi.driverName -}}
{{- end -}}

{{- define "dragonfly-csi.pluginDir" -}}
{{- printf "%s/plugins/%s" (include "dragonfly-csi.kubeletDir" .) (include "dragonfly-csi.driverName" .) -}}
{{- end -}}

{{/*
Where the socket directory and the store appear inside the dfdaemon and csi-plugin
containers. Fixed, whatever the node's paths are: dfcache's default endpoint
(/var/run/dragonfly/dfdaemon.sock) then works in the dfdaemon container, which is what
tools/kubectl-dfcache runs.
*/}}
{{- define "dragonfly-csi.socketMountPath" -}}/var/run/dragonfly{{- end -}}
{{- define "dragonfly-csi.storageMountPath" -}}/var/lib/dragonfly{{- end -}}
{{- define "dragonfly-csi.socketPath" -}}{{ include "dragonfly-csi.socketMountPath" . }}/dfdaemon.sock{{- end -}}

{{/* ---- scheduler and Redis ---- */}}

{{- define "dragonfly-csi.schedulerName" -}}
{{- printf "%s-scheduler" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{- define "dragonfly-csi.schedulerHeadlessName" -}}
{{- printf "%s-scheduler-headless" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{/*
The scheduler address dfdaemon uses: the headless Service, whose DNS name resolves to the
scheduler pods' own IPs, the source addresses of the scheduler's calls to dfdaemon's TCP port
(dfdaemon accepts destructive calls only from the addresses scheduler.addrs resolves to).
*/}}
{{- define "dragonfly-csi.schedulerAddr" -}}
{{- printf "%s.%s.svc.%s:%v" (include "dragonfly-csi.schedulerHeadlessName" .) .Release.Namespace .Values.clusterDomain .Values.scheduler.port -}}
{{- end -}}

{{- define "dragonfly-csi.redisName" -}}
{{- printf "%s-redis" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{- define "dragonfly-csi.redisHeadlessName" -}}
{{- printf "%s-redis-headless" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{/* The stable DNS name of bundled Redis pod N; call with (dict "ctx" $ "i" N). */}}
{{- define "dragonfly-csi.redisPodHost" -}}
{{- printf "%s-%v.%s.%s.svc.%s" (include "dragonfly-csi.redisName" .ctx) .i (include "dragonfly-csi.redisHeadlessName" .ctx) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* Bundled Redis pods: 1, or redis.sentinel.replicas with Sentinel. */}}
{{- define "dragonfly-csi.redisReplicas" -}}
{{- if .Values.redis.sentinel.enabled -}}
{{- $n := int .Values.redis.sentinel.replicas -}}
{{- if lt $n 3 -}}
{{- fail "redis.sentinel.replicas must be at least 3 (a quorum of Sentinels must survive one pod)" -}}
{{- end -}}
{{- $n -}}
{{- else -}}
1
{{- end -}}
{{- end -}}

{{/*
The scheduler's database.redis settings as YAML: bundled Redis (its Service, or every
Sentinel with the master name) or externalRedis. The password is never here: it reaches
the scheduler as SCHEDULER_DATABASE_REDIS_PASSWORD from a Secret.
*/}}
{{- define "dragonfly-csi.schedulerRedis" -}}
{{- if .Values.redis.enabled -}}
{{- if .Values.redis.sentinel.enabled -}}
addrs:
{{- range $i, $_ := until (int (include "dragonfly-csi.redisReplicas" $)) }}
  - {{ printf "%s:%v" (include "dragonfly-csi.redisPodHost" (dict "ctx" $ "i" $i)) $.Values.redis.sentinel.port | quote }}
{{- end }}
masterName: {{ required "redis.sentinel.masterName is required" .Values.redis.sentinel.masterName | quote }}
{{- else -}}
addrs:
  - {{ printf "%s.%s.svc.%s:%v" (include "dragonfly-csi.redisName" .) .Release.Namespace .Values.clusterDomain .Values.redis.port | quote }}
masterName: ""
{{- end }}
username: ""
db: 0
{{- else -}}
{{- if not .Values.externalRedis.addrs -}}
{{- fail "scheduler.enabled needs Redis: set redis.enabled=true or externalRedis.addrs" -}}
{{- end -}}
addrs:
{{- range .Values.externalRedis.addrs }}
  - {{ . | quote }}
{{- end }}
masterName: {{ .Values.externalRedis.masterName | default "" | quote }}
username: {{ .Values.externalRedis.username | default "" | quote }}
db: {{ .Values.externalRedis.db | default 0 | int }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the Redis password, and its key; "" when there is no password. */}}
{{- define "dragonfly-csi.redisSecretName" -}}
{{- if .Values.redis.enabled -}}
{{- if .Values.redis.auth.enabled -}}
{{- default (include "dragonfly-csi.redisName" .) .Values.redis.auth.existingSecret -}}
{{- end -}}
{{- else if .Values.externalRedis.existingSecret -}}
{{- .Values.externalRedis.existingSecret -}}
{{- else if .Values.externalRedis.password -}}
{{- printf "%s-external-redis" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the bundled Sentinels require the Redis password (redis.sentinel.auth.enabled with a password). */}}
{{- define "dragonfly-csi.sentinelAuth" -}}
{{- if and .Values.redis.enabled .Values.redis.sentinel.enabled .Values.redis.sentinel.auth.enabled .Values.redis.auth.enabled -}}true{{- end -}}
{{- end -}}

{{- define "dragonfly-csi.redisSecretKey" -}}
{{- if .Values.redis.enabled -}}
{{- if .Values.redis.auth.existingSecret -}}
{{- required "redis.auth.existingSecretPasswordKey is required" .Values.redis.auth.existingSecretPasswordKey -}}
{{- else -}}
password
{{- end -}}
{{- else if .Values.externalRedis.existingSecret -}}
{{- required "externalRedis.existingSecretPasswordKey is required" .Values.externalRedis.existingSecretPasswordKey -}}
{{- else -}}
password
{{- end -}}
{{- end -}}

{{/*
dfdaemon's configuration: dfdaemon.config with the keys the chart owns filled in (the
socket path and the store, which are mounts of the pod, and scheduler.addrs when the
chart runs the scheduler). Rendered as YAML.
*/}}
{{- define "dragonfly-csi.dfdaemonConfig" -}}
{{- $cfg := deepCopy (default dict .Values.dfdaemon.config) -}}
{{- $download := default dict (get $cfg "download") -}}
{{- $dserver := default dict (get $download "server") -}}
{{- $_ := set $dserver "socketPath" (include "dragonfly-csi.socketPath" .) -}}
{{- $_ := set $download "server" $dserver -}}
{{- $_ := set $cfg "download" $download -}}
{{- $storage := default dict (get $cfg "storage") -}}
{{- $_ := set $storage "dir" (include "dragonfly-csi.storageMountPath" .) -}}
{{- $_ := set $cfg "storage" $storage -}}
{{- if .Values.scheduler.enabled -}}
{{- $sched := default dict (get $cfg "scheduler") -}}
{{- $_ := set $sched "addrs" (list (include "dragonfly-csi.schedulerAddr" .)) -}}
{{- $_ := set $cfg "scheduler" $sched -}}
{{- end -}}
{{- if include "dragonfly-csi.tls.enabled" . -}}
{{- /* TLS: one certificate (the pod's tls volume) for the upload servers, as a client of the other nodes and of the scheduler. */ -}}
{{- $files := fromYaml (include "dragonfly-csi.tls.files" .) -}}
{{- $security := default dict (get $cfg "security") -}}
{{- $_ := set $security "tlsPolicy" (include "dragonfly-csi.tls.policy" .) -}}
{{- $_ := set $cfg "security" $security -}}
{{- $upload := default dict (get $cfg "upload") -}}
{{- $_ := set $upload "server" (merge (deepCopy $files) (default dict (get $upload "server"))) -}}
{{- $_ := set $upload "client" (merge (fromYaml (include "dragonfly-csi.tls.nodeClientFiles" .)) (default dict (get $upload "client"))) -}}
{{- $_ := set $cfg "upload" $upload -}}
{{- $_ := set $cfg "scheduler" (merge (deepCopy $files) (default dict (get $cfg "scheduler"))) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* A port of dfdaemon's configuration, with its default; call with (dict "ctx" $ "key" "health" "default" 4003). */}}
{{- define "dragonfly-csi.dfdaemonPort" -}}
{{- $section := default dict (get (default dict .ctx.Values.dfdaemon.config) .key) -}}
{{- $server := default dict (get $section "server") -}}
{{- $port := "" -}}
{{- if eq .key "storage" -}}
{{- $port = get $server "tcpPort" -}}
{{- else -}}
{{- $port = get $server "port" -}}
{{- end -}}
{{- default .default $port | int -}}
{{- end -}}

{{/*
The scheduler's configuration: scheduler.config with the keys the chart owns (its port and
listen address, the metrics server the probes use, database.redis from redis or
externalRedis). Rendered as YAML.
*/}}
{{- define "dragonfly-csi.schedulerConfig" -}}
{{- $cfg := deepCopy (default dict .Values.scheduler.config) -}}
{{- $server := default dict (get $cfg "server") -}}
{{- $_ := set $server "listenIP" "0.0.0.0" -}}
{{- $_ := set $server "port" (int .Values.scheduler.port) -}}
{{- $_ := set $cfg "server" $server -}}
{{- $metrics := default dict (get $cfg "metrics") -}}
{{- $mserver := default dict (get $metrics "server") -}}
{{- $_ := set $mserver "ip" "0.0.0.0" -}}
{{- $_ := set $mserver "port" (int .Values.scheduler.metricsPort) -}}
{{- $_ := set $metrics "server" $mserver -}}
{{- $_ := set $cfg "metrics" $metrics -}}
{{- $database := default dict (get $cfg "database") -}}
{{- $redis := default dict (get $database "redis") -}}
{{- range $k, $v := fromYaml (include "dragonfly-csi.schedulerRedis" .) -}}
{{- $_ := set $redis $k $v -}}
{{- end -}}
{{- $_ := set $database "redis" $redis -}}
{{- $_ := set $cfg "database" $database -}}
{{- if include "dragonfly-csi.tls.enabled" . -}}
{{- /* TLS: one certificate (the pod's tls volume) for the gRPC server and the calls to the nodes. */ -}}
{{- $files := fromYaml (include "dragonfly-csi.tls.files" .) -}}
{{- $security := default dict (get $cfg "security") -}}
{{- $_ := set $security "tlsPolicy" (include "dragonfly-csi.tls.policy" .) -}}
{{- $_ := set $cfg "security" $security -}}
{{- $_ := set $server "tls" (merge (deepCopy $files) (default dict (get $server "tls"))) -}}
{{- $peer := default dict (get $cfg "peer") -}}
{{- $_ := set $peer "tls" (merge (fromYaml (include "dragonfly-csi.tls.nodeClientFiles" .)) (default dict (get $peer "tls"))) -}}
{{- $_ := set $cfg "peer" $peer -}}
{{- if include "dragonfly-csi.tls.redis" . -}}
{{- /* TLS to the bundled Redis and Sentinels, with the scheduler's certificate as the client's. */ -}}
{{- $_ := set $redis "tls" (merge (deepCopy $files) (default dict (get $redis "tls"))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

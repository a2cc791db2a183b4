{{/*
TLS of the cluster's TCP ports (values tls.*; the chart README, "TLS"). The certificates are
mounted at tls.mountPath below in cert-manager's Secret layout (ca.crt, tls.crt, tls.key) and
named by the daemons' TLS keys (docs/configuration.md).
*/}}

{{/* "true" when the chart turns TLS on: tls.enabled and a scheduler (standalone daemons listen on no TCP port). */}}
{{- define "dragonfly-csi.tls.enabled" -}}
{{- if and .Values.tls.enabled .Values.scheduler.enabled -}}true{{- end -}}
{{- end -}}

{{/* The binaries' security.tlsPolicy: mutual or server-auth. */}}
{{- define "dragonfly-csi.tls.policy" -}}
{{- $p := toString .Values.tls.policy -}}
{{- if not (has $p (list "mutual" "server-auth")) -}}
{{- fail (printf "tls.policy must be mutual or server-auth, not %q (tls.enabled=false turns TLS off)" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* "true" when cert-manager issues the certificates (tls.certManager, auto: when the cluster serves cert-manager.io/v1). */}}
{{- define "dragonfly-csi.tls.certManager" -}}
{{- $v := toString .Values.tls.certManager -}}
{{- if eq $v "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}true{{- end -}}
{{- else if eq $v "true" -}}
true
{{- else if ne $v "false" -}}
{{- fail (printf "tls.certManager must be auto, true or false, not %q" $v) -}}
{{- end -}}
{{- end -}}

{{/* Where a pod sees its own certificate files (a Secret or hostPath volume). */}}
{{- define "dragonfly-csi.tls.mountPath" -}}/etc/dragonfly-tls{{- end -}}

{{/* The Secrets: the CA (ca.crt, tls.crt, tls.key: the CA's own key), the scheduler's, the shared node certificate's. */}}
{{- define "dragonfly-csi.tls.caSecret" -}}
{{- printf "%s-ca" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}
{{- define "dragonfly-csi.tls.schedulerSecret" -}}
{{- printf "%s-scheduler-tls" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}
{{- define "dragonfly-csi.tls.nodeSecret" -}}
{{- printf "%s-node-tls" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{/* "true" when node pods take per-node certificates from a hostPath (tls.nodeCertificates.source). */}}
{{- define "dragonfly-csi.tls.nodeHostPath" -}}
{{- $s := toString .Values.tls.nodeCertificates.source -}}
{{- if eq $s "hostPath" -}}
true
{{- else if ne $s "shared" -}}
{{- fail (printf "tls.nodeCertificates.source must be shared or hostPath, not %q" $s) -}}
{{- end -}}
{{- end -}}

{{/*
The scheduler certificate's DNS names: both Services under every name a client may use
(dfdaemon dials the headless one, scheduler.addrs), as a JSON list.
*/}}
{{- define "dragonfly-csi.tls.schedulerDNSNames" -}}
{{- $names := list -}}
{{- range $svc := list (include "dragonfly-csi.schedulerHeadlessName" .) (include "dragonfly-csi.schedulerName" .) -}}
{{- $names = concat $names (list $svc (printf "%s.%s" $svc $.Release.Namespace) (printf "%s.%s.svc" $svc $.Release.Namespace) (printf "%s.%s.svc.%s" $svc $.Release.Namespace $.Values.clusterDomain)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* The identities (URI SANs) of the scheduler and of the shared node certificate. */}}
{{- define "dragonfly-csi.tls.schedulerURI" -}}dragonfly://scheduler{{- end -}}
{{- define "dragonfly-csi.tls.nodeURI" -}}dragonfly://node{{- end -}}
{{/* The DNS SAN of the shared node certificate, which the clients dialling a node verify in shared mode (upload.client.serverName, peer.tls.serverName) instead of the node's IP. */}}
{{- define "dragonfly-csi.tls.nodeName" -}}dfc-node{{- end -}}

{{/* The client files of a side that dials nodes: tls.files, plus serverName in shared mode. */}}
{{- define "dragonfly-csi.tls.nodeClientFiles" -}}
{{- $files := fromYaml (include "dragonfly-csi.tls.files" .) -}}
{{- if not (include "dragonfly-csi.tls.nodeHostPath" .) -}}
{{- $_ := set $files "serverName" (include "dragonfly-csi.tls.nodeName" .) -}}
{{- end -}}
{{- toYaml $files -}}
{{- end -}}

{{/* The three file keys of one side, as YAML: caCert, cert, key under tls.mountPath. */}}
{{- define "dragonfly-csi.tls.files" -}}
{{- $dir := include "dragonfly-csi.tls.mountPath" . -}}
caCert: {{ printf "%s/ca.crt" $dir }}
cert: {{ printf "%s/tls.crt" $dir }}
key: {{ printf "%s/tls.key" $dir }}
{{- end -}}

{{/*
A pod's TLS volume, named tls: the scheduler's Secret, or for the node pods the shared Secret
or the hostPath of tls.nodeCertificates. Call with (dict "ctx" $ "component" "scheduler"|"dfdaemon").
*/}}
{{- define "dragonfly-csi.tls.volume" -}}
- name: tls
{{- if and (eq .component "dfdaemon") (include "dragonfly-csi.tls.nodeHostPath" .ctx) }}
  # Per-node certificates provisioned on the node (tls.nodeCertificates.source hostPath).
  hostPath:
    path: {{ required "tls.nodeCertificates.hostPath is required" .ctx.Values.tls.nodeCertificates.hostPath }}
    type: Directory
{{- else }}
  secret:
    secretName: {{ if eq .component "scheduler" }}{{ include "dragonfly-csi.tls.schedulerSecret" .ctx }}{{ else }}{{ include "dragonfly-csi.tls.nodeSecret" .ctx }}{{ end }}
    defaultMode: 288 # 0440: read by root and the fsGroup
    items:
      - key: ca.crt
        path: ca.crt
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end -}}

{{/* "true" when the bundled Redis (and Sentinel) speaks TLS: redis.tls.enabled (the default)
with tls.enabled; with tls.enabled=false the whole cluster, Redis included, is plaintext. */}}
{{- define "dragonfly-csi.tls.redis" -}}
{{- if and .Values.scheduler.enabled .Values.redis.enabled .Values.redis.tls.enabled .Values.tls.enabled -}}
true
{{- end -}}
{{- end -}}

{{- define "dragonfly-csi.tls.redisSecret" -}}
{{- printf "%s-redis-tls" (include "dragonfly-csi.fullname" .) -}}
{{- end -}}

{{/* Where the Redis and Sentinel containers see the Redis certificate. */}}
{{- define "dragonfly-csi.tls.redisMountPath" -}}/etc/redis-tls{{- end -}}

{{/* The Redis certificate's DNS names: its Services and every pod under the headless one, as a JSON list. */}}
{{- define "dragonfly-csi.tls.redisDNSNames" -}}
{{- $names := list -}}
{{- $headless := include "dragonfly-csi.redisHeadlessName" . -}}
{{- range $svc := list (include "dragonfly-csi.redisName" .) $headless -}}
{{- $names = concat $names (list $svc (printf "%s.%s" $svc $.Release.Namespace) (printf "%s.%s.svc" $svc $.Release.Namespace) (printf "%s.%s.svc.%s" $svc $.Release.Namespace $.Values.clusterDomain)) -}}
{{- end -}}
{{- $names = append $names (printf "*.%s.%s.svc.%s" $headless .Release.Namespace .Values.clusterDomain) -}}
{{- toJson $names -}}
{{- end -}}

{{/* redis-cli's TLS options in the Redis pod's scripts and probes ("" without Redis TLS). */}}
{{- define "dragonfly-csi.tls.redisCli" -}}
{{- if include "dragonfly-csi.tls.redis" . -}}
{{- $d := include "dragonfly-csi.tls.redisMountPath" . -}}
--tls --cacert {{ $d }}/ca.crt --cert {{ $d }}/tls.crt --key {{ $d }}/tls.key
{{- end -}}
{{- end -}}

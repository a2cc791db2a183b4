// Turning rendered templates into `helm template` output: each file is split at "---" lines,
// whitespace-only documents are dropped (a document with only comments is kept, as Helm keeps
// it), every document must parse as YAML, documents are ordered by Helm's install order of
// kinds (then file name, then position in the file), hooks ("helm.sh/hook") come last, and each
// is printed as "---\n# Source: <file>\n<document>\n".
package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

var docSep = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// installOrder is Helm's releaseutil.InstallOrder.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

type manifest struct {
	source  string
	content string
	kind    string
	hook    bool
	seq     int
}

type simpleHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Metadata   *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

func splitManifests(s string) []string {
	var docs []string
	for _, d := range docSep.Split(strings.TrimSpace(s), -1) {
		if d = strings.TrimSpace(d); d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// collectManifests parses and orders the rendered files (NOTES.txt excluded by the caller).
func collectManifests(rendered map[string]string) ([]manifest, error) {
	var all []manifest
	seq := 0
	for _, name := range sortedKeys(rendered) {
		if strings.TrimSpace(rendered[name]) == "" {
			continue
		}
		for _, d := range splitManifests(rendered[name]) {
			var head simpleHead
			if err := yaml.Unmarshal([]byte(d), &head); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %v", name, err)
			}
			m := manifest{source: name, content: d, kind: head.Kind, seq: seq}
			if head.Metadata != nil {
				_, m.hook = head.Metadata.Annotations["helm.sh/hook"]
			}
			all = append(all, m)
			seq++
		}
	}
	rank := map[string]int{}
	for i, k := range installOrder {
		rank[k] = i
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.hook != b.hook {
			return !a.hook
		}
		ra, aok := rank[a.kind]
		rb, bok := rank[b.kind]
		switch {
		case aok && bok && ra != rb:
			return ra < rb
		case aok != bok:
			return aok
		case !aok && !bok && a.kind != b.kind:
			return a.kind < b.kind
		}
		return a.seq < b.seq
	})
	return all, nil
}

func writeManifests(w io.Writer, ms []manifest) error {
	for _, m := range ms {
		if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.source, m.content); err != nil {
			return err
		}
	}
	return nil
}

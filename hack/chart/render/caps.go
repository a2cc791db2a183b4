// .Capabilities: the Kubernetes version (--kube-version) and the API versions the renderer
// claims (the built-in groups of that release plus --api-versions), as `helm template` fakes them.
package main

import (
	"fmt"
	"strconv"
	"strings"
)

type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

func (k KubeVersion) String() string     { return k.Version }
func (k KubeVersion) GitVersion() string { return k.Version }

// VersionSet is .Capabilities.APIVersions; Has takes "group/version" or "group/version/Kind".
type VersionSet []string

func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type HelmVersion struct {
	Version   string
	GitCommit string
	GoVersion string
}

type Capabilities struct {
	APIVersions VersionSet
	KubeVersion KubeVersion
	HelmVersion HelmVersion
}

// builtinAPIs lists the group/versions and kinds a Kubernetes 1.25+ API server serves.
var builtinAPIs = map[string][]string{
	"v1": {"ConfigMap", "Endpoints", "Event", "LimitRange", "Namespace", "Node", "PersistentVolume",
		"PersistentVolumeClaim", "Pod", "PodTemplate", "ReplicationController", "ResourceQuota",
		"Secret", "Service", "ServiceAccount"},
	"admissionregistration.k8s.io/v1":      {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"},
	"apiextensions.k8s.io/v1":              {"CustomResourceDefinition"},
	"apiregistration.k8s.io/v1":            {"APIService"},
	"apps/v1":                              {"ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"},
	"authentication.k8s.io/v1":             {"TokenReview"},
	"authorization.k8s.io/v1":              {"LocalSubjectAccessReview", "SelfSubjectAccessReview", "SubjectAccessReview"},
	"autoscaling/v1":                       {"HorizontalPodAutoscaler"},
	"autoscaling/v2":                       {"HorizontalPodAutoscaler"},
	"batch/v1":                             {"CronJob", "Job"},
	"certificates.k8s.io/v1":               {"CertificateSigningRequest"},
	"coordination.k8s.io/v1":               {"Lease"},
	"discovery.k8s.io/v1":                  {"EndpointSlice"},
	"events.k8s.io/v1":                     {"Event"},
	"flowcontrol.apiserver.k8s.io/v1beta2": {"FlowSchema", "PriorityLevelConfiguration"},
	"networking.k8s.io/v1":                 {"Ingress", "IngressClass", "NetworkPolicy"},
	"node.k8s.io/v1":                       {"RuntimeClass"},
	"policy/v1":                            {"PodDisruptionBudget"},
	"rbac.authorization.k8s.io/v1":         {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"},
	"scheduling.k8s.io/v1":                 {"PriorityClass"},
	"storage.k8s.io/v1":                    {"CSIDriver", "CSINode", "CSIStorageCapacity", "StorageClass", "VolumeAttachment"},
}

// parseKubeVersion accepts "1.26", "v1.26" or "v1.26.3".
func parseKubeVersion(s string) (KubeVersion, error) {
	t := strings.TrimPrefix(s, "v")
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return KubeVersion{}, fmt.Errorf("--kube-version %q: want MAJOR.MINOR[.PATCH]", s)
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return KubeVersion{}, fmt.Errorf("--kube-version %q: %q is not a number", s, p)
		}
	}
	patch := "0"
	if len(parts) == 3 {
		patch = parts[2]
	}
	return KubeVersion{
		Version: fmt.Sprintf("v%s.%s.%s", parts[0], parts[1], patch),
		Major:   parts[0],
		Minor:   parts[1],
	}, nil
}

func newCapabilities(kv KubeVersion, extra []string) Capabilities {
	var set VersionSet
	for gv, kinds := range builtinAPIs {
		set = append(set, gv)
		for _, k := range kinds {
			set = append(set, gv+"/"+k)
		}
	}
	set = append(set, extra...)
	return Capabilities{
		APIVersions: set,
		KubeVersion: kv,
		HelmVersion: HelmVersion{Version: "v3.12.3", GoVersion: "go1.19"},
	}
}

// Helm's `lookup apiVersion kind namespace name` against the objects of --lookup FILE, as `helm
// upgrade` sees a live cluster (FILE is multi-document YAML, such as an earlier rendering).
// Without --lookup it finds nothing, as under `helm template`.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// lookupObjects are the "cluster's" objects; set once by main before rendering.
var lookupObjects []map[string]interface{}

// readLookupFile appends every object of a multi-document YAML file to lookupObjects.
func readLookupFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i, doc := range splitManifests(string(data)) {
		obj := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("%s: document %d: %v", path, i+1, err)
		}
		if obj == nil || obj["kind"] == nil {
			continue // comments only
		}
		lookupObjects = append(lookupObjects, obj)
	}
	return nil
}

func metaString(obj map[string]interface{}, key string) string {
	m, _ := obj["metadata"].(map[string]interface{})
	s, _ := m[key].(string)
	return s
}

// lookup returns the object (name given) or a list {"items": [...]} (name ""), copied so that a
// template cannot change the store; namespace "" matches every namespace.
func lookup(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
	var items []interface{}
	for _, o := range lookupObjects {
		if o["apiVersion"] != apiVersion || o["kind"] != kind {
			continue
		}
		if namespace != "" && metaString(o, "namespace") != namespace {
			continue
		}
		if name != "" {
			if metaString(o, "name") == name {
				return deepCopy(o).(map[string]interface{}), nil
			}
			continue
		}
		items = append(items, deepCopy(o))
	}
	if name != "" {
		return map[string]interface{}{}, nil
	}
	if items == nil {
		return map[string]interface{}{}, nil
	}
	return map[string]interface{}{"apiVersion": apiVersion, "kind": kind + "List", "items": items}, nil
}

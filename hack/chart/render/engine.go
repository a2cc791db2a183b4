// The template engine, written after Helm 3's pkg/engine: every file under templates/ is parsed
// into one template set ("gotpl", missingkey=zero), each non-partial file is executed with its
// own .Template, and "<no value>" is removed from the output. The function map is sprig's
// TxtFuncMap without env/expandenv, plus Helm's include, tpl, required, lookup, toYaml,
// mustToYaml, fromYaml, fromYamlArray, toJson, mustToJson, fromJson, fromJsonArray. Helm's
// toToml, getHostByName (sprig's would query DNS) and .Files.AsSecrets are not implemented: a
// template calling one fails naming it (notImplemented), never renders a guess.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

const recursionMax = 1000

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func mustToYAML(v interface{}) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	a := []interface{}{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func mustToJSON(v interface{}) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func required(warn string, val interface{}) (interface{}, error) {
	if val == nil {
		return val, errors.New(warn)
	}
	if s, ok := val.(string); ok && s == "" {
		return val, errors.New(warn)
	}
	return val, nil
}

// notImplemented is a Helm template function chart-render does not provide: calling it fails.
func notImplemented(name string) func(...interface{}) (string, error) {
	return func(...interface{}) (string, error) {
		return "", fmt.Errorf("%s is not implemented by chart-render (render this chart with helm)", name)
	}
}

// baseFuncs is the function map without the functions that close over the template set.
func baseFuncs() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	extra := template.FuncMap{
		"toYaml":        toYAML,
		"mustToYaml":    mustToYAML,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"mustToJson":    mustToJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"required":      required,
		// The objects of --lookup FILE; none (as under helm template) without it.
		"lookup":        lookup,
		"toToml":        notImplemented("toToml"),
		"getHostByName": notImplemented("getHostByName"),
		"include":       func(string, interface{}) string { return "not implemented" },
		"tpl":           func(string, interface{}) interface{} { return "not implemented" },
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

func includeFun(t *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if included[name] > recursionMax {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		included[name]++
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		included[name]--
		return buf.String(), err
	}
}

func tplFun(parent *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(text string, vals interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %v", err)
		}
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{
			"include": includeFun(t, included),
			"tpl":     tplFun(t, included),
		})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %v", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %v", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// templateOrder is Helm's sortTemplates: deepest paths first, then names in reverse order.
func templateOrder(tpls map[string]string) []string {
	keys := sortedKeys(tpls)
	sort.SliceStable(keys, func(i, j int) bool {
		ci, cj := strings.Count(keys[i], "/"), strings.Count(keys[j], "/")
		if ci != cj {
			return ci > cj
		}
		return keys[i] > keys[j]
	})
	return keys
}

// renderTemplates executes every template that is not a partial (base name starting with "_")
// and returns name -> output. top is the data (.Values, .Release, ...) without .Template.
func renderTemplates(c *chartDir, top map[string]interface{}) (map[string]string, error) {
	t := template.New("gotpl").Option("missingkey=zero")
	included := map[string]int{}
	funcs := baseFuncs()
	funcs["include"] = includeFun(t, included)
	funcs["tpl"] = tplFun(t, included)
	t.Funcs(funcs)

	order := templateOrder(c.templates)
	for _, name := range order {
		if _, err := t.New(name).Parse(c.templates[name]); err != nil {
			return nil, fmt.Errorf("parse error in %s: %v", name, err)
		}
	}
	out := map[string]string{}
	basePath := path.Join(c.meta.Name, "templates")
	for _, name := range order {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		vals := make(map[string]interface{}, len(top)+1)
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": name, "BasePath": basePath}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, name, vals); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		out[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}

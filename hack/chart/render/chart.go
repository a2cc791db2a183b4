// Loading a chart directory: Chart.yaml (as Helm's chart.Metadata, capitalised field names),
// values.yaml, every file under templates/ (templates) and the other files (.Files).
// What it does not implement it refuses, loudly, rather than render something Helm would not:
// dependencies and subcharts (Chart.yaml dependencies, requirements.yaml, charts/),
// and crds/ (see unsupported below). values.schema.json is checked (schema.go) and .helmignore
// applied (ignore.go).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Maintainer and Metadata mirror Helm's chart.Maintainer and chart.Metadata, so templates see
// .Chart.Name, .Chart.Version, .Chart.AppVersion and the rest as Helm exposes them.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*Maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Type         string            `json:"type,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
}

type chartDir struct {
	meta      Metadata
	defaults  map[string]interface{}
	templates map[string]string // "<chart>/templates/<rel>" -> text
	files     Files             // other files, by path relative to the chart dir
	schema    []byte            // values.schema.json, or nil (schema.go)
}

// unsupported lists the chart files whose meaning chart-render does not implement: with any of
// them the output could differ from helm template's, so the chart is refused.
var unsupported = []struct{ name, what string }{
	{"charts", "subcharts"},
	{"requirements.yaml", "dependencies (apiVersion v1)"},
	{"crds", "CRD directories"},
}

func loadChart(dir string) (*chartDir, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("--chart %s: %v", dir, err)
	}
	c := &chartDir{templates: map[string]string{}, files: Files{}}
	if err := yaml.Unmarshal(data, &c.meta); err != nil {
		return nil, fmt.Errorf("%s/Chart.yaml: %v", dir, err)
	}
	if c.meta.Name == "" {
		return nil, fmt.Errorf("%s/Chart.yaml: name is required", dir)
	}
	if c.meta.Version == "" {
		return nil, fmt.Errorf("%s/Chart.yaml: version is required", dir)
	}
	if len(c.meta.Dependencies) > 0 {
		return nil, fmt.Errorf("%s/Chart.yaml: dependencies are not supported by chart-render "+
			"(render this chart with helm)", dir)
	}
	for _, u := range unsupported {
		if _, err := os.Lstat(filepath.Join(dir, u.name)); err == nil {
			return nil, fmt.Errorf("%s/%s: %s are not supported by chart-render "+
				"(render this chart with helm)", dir, u.name, u.what)
		}
	}
	c.defaults = map[string]interface{}{}
	if _, err := os.Stat(filepath.Join(dir, "values.yaml")); err == nil {
		if c.defaults, err = readValuesFile(filepath.Join(dir, "values.yaml")); err != nil {
			return nil, err
		}
	}
	rules, err := parseIgnore(".helmignore", nil)
	if data, rerr := os.ReadFile(filepath.Join(dir, ".helmignore")); rerr == nil {
		rules, err = parseIgnore(filepath.Join(dir, ".helmignore"), data)
	}
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if rules.ignored(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.templates[path.Join(c.meta.Name, rel)] = string(body)
		case rel == "values.schema.json": // checked, never in .Files (as Helm)
			c.schema = body
		case rel == "Chart.yaml" || rel == "values.yaml":
		default:
			c.files[rel] = body
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Files is .Files: the chart's non-template files.
type Files map[string][]byte

func (f Files) GetBytes(name string) []byte { return f[name] }
func (f Files) Get(name string) string      { return string(f[name]) }

func (f Files) Lines(name string) []string {
	s := string(f[name])
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, body := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = body
		}
	}
	return out
}

// AsConfig renders the files as the data of a ConfigMap (base name: content), as Helm does.
// AsSecrets is Helm's, but not implemented here: a template calling it fails with this error.
func (f Files) AsSecrets() (string, error) {
	return "", errors.New(".Files.AsSecrets is not implemented by chart-render (render this chart with helm)")
}

func (f Files) AsConfig() string {
	m := map[string]string{}
	for name, body := range f {
		m[path.Base(name)] = string(body)
	}
	return toYAML(m)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

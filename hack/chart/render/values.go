// Values: reading values files, merging -f files and --set strings, and coalescing them over the
// chart's values.yaml the way Helm 3 does (pkg/chartutil coalesce, pkg/cli/values, pkg/strvals).
// Every map here is map[string]interface{} owned by the caller; nothing is shared with the chart.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// readValuesFile parses a YAML values file like Helm: sigs.k8s.io/yaml, so numbers are float64.
// An empty file is an empty map.
func readValuesFile(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// mergeMaps deep-merges src into dst (src wins, tables merge), as Helm merges -f files.
func mergeMaps(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if sv, ok := v.(map[string]interface{}); ok {
			if dv, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = mergeMaps(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// coalesce merges the chart's defaults under the user's values (user wins); a user null deletes
// the key, a default table merges into a user table. Returns user (modified).
func coalesce(user, defaults map[string]interface{}, warn func(string)) map[string]interface{} {
	if user == nil {
		user = map[string]interface{}{}
	}
	coalesceTables(user, defaults, "", warn)
	return user
}

func coalesceTables(dst, src map[string]interface{}, prefix string, warn func(string)) {
	for key, val := range src {
		full := key
		if prefix != "" {
			full = prefix + "." + key
		}
		dv, ok := dst[key]
		switch {
		case ok && dv == nil:
			delete(dst, key)
		case !ok:
			dst[key] = deepCopy(val)
		default:
			st, sok := val.(map[string]interface{})
			dt, dok := dv.(map[string]interface{})
			if sok && dok {
				coalesceTables(dt, st, full, warn)
			} else if sok && !dok {
				warn(fmt.Sprintf("warning: cannot overwrite table with non table for %s (%v)", full, val))
			} else if dok && val != nil {
				warn(fmt.Sprintf("warning: destination for %s is a table. Ignoring non-table value (%v)", full, val))
			}
		}
	}
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, e := range t {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// ---- --set / --set-string (the common part of Helm's strvals) ----

// parseSet applies one --set argument ("a.b=c,d[0]=e,f={x,y}") to vals. With asString every
// value stays a string (--set-string).
func parseSet(arg string, vals map[string]interface{}, asString bool) error {
	for _, assign := range splitUnescaped(arg, ',', true) {
		if assign == "" {
			continue
		}
		eq := indexUnescaped(assign, '=')
		if eq < 0 {
			return fmt.Errorf("key %q has no value", unescape(assign))
		}
		key, raw := assign[:eq], assign[eq+1:]
		var val interface{}
		if len(raw) >= 2 && raw[0] == '{' && raw[len(raw)-1] == '}' {
			list := []interface{}{}
			for _, item := range splitUnescaped(raw[1:len(raw)-1], ',', false) {
				list = append(list, typedVal(unescape(item), asString))
			}
			val = list
		} else {
			val = typedVal(unescape(raw), asString)
		}
		path, err := parseKeyPath(key)
		if err != nil {
			return err
		}
		if err := setPath(vals, path, val); err != nil {
			return fmt.Errorf("--set %s: %v", unescape(key), err)
		}
	}
	return nil
}

// typedVal follows strvals: true/false/null and decimal integers without a leading zero are
// typed (int64), everything else is a string.
func typedVal(s string, asString bool) interface{} {
	if asString {
		return s
	}
	switch {
	case strings.EqualFold(s, "true"):
		return true
	case strings.EqualFold(s, "false"):
		return false
	case strings.EqualFold(s, "null"):
		return nil
	case s == "0":
		return int64(0)
	}
	if s != "" && s[0] != '0' {
		if iv, err := strconv.ParseInt(s, 10, 64); err == nil {
			return iv
		}
	}
	return s
}

// A key path element: a map key, or a list index when idx >= 0.
type pathElem struct {
	key string
	idx int
}

func parseKeyPath(key string) ([]pathElem, error) {
	var out []pathElem
	for _, part := range splitUnescaped(key, '.', false) {
		name := part
		var idxs []int
		if b := indexUnescaped(part, '['); b >= 0 {
			name = part[:b]
			rest := part[b:]
			for rest != "" {
				if rest[0] != '[' {
					return nil, fmt.Errorf("key %q: bad list index", unescape(key))
				}
				end := strings.IndexByte(rest, ']')
				if end < 0 {
					return nil, fmt.Errorf("key %q: unterminated list index", unescape(key))
				}
				n, err := strconv.Atoi(rest[1:end])
				if err != nil || n < 0 || n > 65536 {
					return nil, fmt.Errorf("key %q: list index %q is not a small non-negative integer", unescape(key), rest[1:end])
				}
				idxs = append(idxs, n)
				rest = rest[end+1:]
			}
		}
		if name == "" {
			return nil, fmt.Errorf("key %q has an empty name", unescape(key))
		}
		out = append(out, pathElem{key: unescape(name), idx: -1})
		for _, n := range idxs {
			out = append(out, pathElem{idx: n})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty key")
	}
	return out, nil
}

// setPath sets val at path inside the map m, creating tables and growing lists as needed.
func setPath(m map[string]interface{}, path []pathElem, val interface{}) error {
	var cur interface{} = m
	setter := func(interface{}) {}
	for i, e := range path {
		last := i == len(path)-1
		if e.idx < 0 {
			t, ok := cur.(map[string]interface{})
			if !ok {
				t = map[string]interface{}{}
				setter(t)
			}
			if last {
				t[e.key] = val
				return nil
			}
			next := t[e.key]
			k := e.key
			setter = func(v interface{}) { t[k] = v }
			cur = next
			continue
		}
		l, _ := cur.([]interface{})
		for len(l) <= e.idx {
			l = append(l, nil)
		}
		setter(l)
		if last {
			l[e.idx] = val
			return nil
		}
		n := e.idx
		setter = func(v interface{}) { l[n] = v }
		cur = l[n]
	}
	return nil
}

// splitUnescaped splits s at sep not preceded by a backslash (and, when braces, not inside {}).
func splitUnescaped(s string, sep byte, braces bool) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i++
		case braces && s[i] == '{':
			depth++
		case braces && s[i] == '}' && depth > 0:
			depth--
		case s[i] == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func indexUnescaped(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == c {
			return i
		}
	}
	return -1
}

func unescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

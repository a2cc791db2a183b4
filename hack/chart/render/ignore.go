// .helmignore, as Helm 3 reads it when it loads a chart directory: one pattern per line, '#'
// comments, '!' negates, a trailing '/' matches directories only, a leading '/' or an inner '/'
// matches the whole path from the chart root, any other pattern the base name only; '**' is an
// error. The default rule "templates/.?*" (hidden files under templates/) always applies. A
// directory that matches is skipped with everything under it.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
)

type ignoreRule struct {
	negate, dirOnly, whole bool
	glob                   string
}

type ignoreRules []ignoreRule

func parseIgnore(name string, data []byte) (ignoreRules, error) {
	rules := ignoreRules{}
	lines := []string{"templates/.?*"}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") {
			return nil, fmt.Errorf("%s:%d: double-star (**) syntax is not supported", name, i)
		}
		if _, err := path.Match(line, "abc"); err != nil {
			return nil, fmt.Errorf("%s:%d: %q: %v", name, i, line, err)
		}
		r := ignoreRule{}
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		r.whole = strings.Contains(line, "/")
		r.glob = strings.TrimPrefix(line, "/")
		rules = append(rules, r)
	}
	return rules, nil
}

func (r ignoreRule) matches(rel string) bool {
	if !r.whole {
		rel = path.Base(rel)
	}
	ok, _ := path.Match(r.glob, rel)
	return ok
}

// ignored reports whether rel (slash-separated, relative to the chart root) is left out. As in
// Helm, a negated rule keeps out everything it does not match.
func (rules ignoreRules) ignored(rel string, isDir bool) bool {
	for _, r := range rules {
		if r.negate {
			if (r.dirOnly && !isDir) || !r.matches(rel) {
				return true
			}
			continue
		}
		if r.dirOnly && !isDir {
			continue
		}
		if r.matches(rel) {
			return true
		}
	}
	return false
}

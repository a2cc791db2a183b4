// chart-render: renders a Helm chart directory like `helm template`, without Helm.
//
//	chart-render --chart DIR [--values FILE]... [--set K=V]... [--set-string K=V]...
//	             [--name RELEASE] [--namespace NS] [--kube-version 1.26] [--api-versions G/V]...
//	             [--lookup FILE]... [--notes]
//
// Prints the manifests as multi-document YAML on stdout (or, with --notes, only the rendered
// templates/NOTES.txt). --lookup FILE gives `lookup` the objects of a multi-document YAML file
// as the cluster's (without it lookup finds nothing, as under helm template). Exit 1 on a chart, values or template error (the message names the
// file), 2 on a bad command line.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart-render: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	fl := flag.NewFlagSet("chart-render", flag.ContinueOnError)
	chart := fl.String("chart", "", "chart directory (required)")
	var valueFiles, sets, setStrings, apiVersions, lookupFiles multiFlag
	fl.Var(&valueFiles, "values", "values file, merged over values.yaml in order (repeatable)")
	fl.Var(&valueFiles, "f", "short for --values")
	fl.Var(&sets, "set", "a.b=c[,d[0]=e]: set values, typed like helm --set (repeatable)")
	fl.Var(&setStrings, "set-string", "like --set, every value a string (repeatable)")
	fl.Var(&apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	fl.Var(&lookupFiles, "lookup", "objects (multi-document YAML) that lookup finds, as in a cluster (repeatable)")
	name := fl.String("name", "release-name", "release name (.Release.Name)")
	namespace := fl.String("namespace", "default", "release namespace (.Release.Namespace)")
	kube := fl.String("kube-version", "1.26.0", "Kubernetes version for .Capabilities.KubeVersion")
	notes := fl.Bool("notes", false, "print only the rendered templates/NOTES.txt")
	if err := fl.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fl.NArg() != 0 {
		fail(2, "unexpected argument %q", fl.Arg(0))
	}
	if *chart == "" {
		fail(2, "--chart DIR is required")
	}
	kv, err := parseKubeVersion(*kube)
	if err != nil {
		fail(2, "%v", err)
	}

	for _, f := range lookupFiles {
		if err := readLookupFile(f); err != nil {
			fail(1, "--lookup %v", err)
		}
	}

	c, err := loadChart(*chart)
	if err != nil {
		fail(1, "%v", err)
	}
	user := map[string]interface{}{}
	for _, f := range valueFiles {
		v, err := readValuesFile(f)
		if err != nil {
			fail(1, "--values %v", err)
		}
		user = mergeMaps(user, v)
	}
	for _, s := range sets {
		if err := parseSet(s, user, false); err != nil {
			fail(1, "--set %s: %v", s, err)
		}
	}
	for _, s := range setStrings {
		if err := parseSet(s, user, true); err != nil {
			fail(1, "--set-string %s: %v", s, err)
		}
	}
	vals := coalesce(user, c.defaults, func(msg string) { fmt.Fprintln(os.Stderr, msg) })
	if err := validateValues(c, vals); err != nil {
		fail(1, "%v", err)
	}
	top := map[string]interface{}{
		"Values": vals,
		"Chart":  c.meta,
		"Files":  c.files,
		"Release": map[string]interface{}{
			"Name":      *name,
			"Namespace": *namespace,
			"Revision":  1,
			"IsInstall": true,
			"IsUpgrade": false,
			"Service":   "Helm",
		},
		"Capabilities": newCapabilities(kv, apiVersions),
	}
	rendered, err := renderTemplates(c, top)
	if err != nil {
		fail(1, "%v", err)
	}
	notesName := c.meta.Name + "/templates/NOTES.txt"
	notesText, hasNotes := rendered[notesName]
	delete(rendered, notesName)

	w := bufio.NewWriter(os.Stdout)
	if *notes {
		if !hasNotes {
			fail(1, "%s: no such template", notesName)
		}
		fmt.Fprintln(w, strings.TrimSpace(notesText))
	} else {
		ms, err := collectManifests(rendered)
		if err != nil {
			fail(1, "%v", err)
		}
		if err := writeManifests(w, ms); err != nil {
			fail(1, "stdout: %v", err)
		}
	}
	if err := w.Flush(); err != nil {
		fail(1, "stdout: %v", err)
	}
}

// Values schemas: a chart's values.schema.json checked against the coalesced values before any
// template renders, as Helm 3 does (pkg/chartutil ValidateAgainstSchema with the same
// gojsonschema): the values as JSON against the schema, every failure listed, nothing rendered.
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// validateValues returns nil when the chart has no schema or vals meet it; else Helm's message:
// "values don't meet the specifications of the schema(s) in the following chart(s):", the
// chart's name, and one "- field: description" line per failure.
func validateValues(c *chartDir, vals map[string]interface{}) error {
	if c.schema == nil {
		return nil
	}
	doc, err := json.Marshal(vals)
	if err != nil {
		return fmt.Errorf("values as JSON: %v", err)
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.schema),
		gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("%s/values.schema.json: %v", c.meta.Name, err)
	}
	if res.Valid() {
		return nil
	}
	var b strings.Builder
	for _, e := range res.Errors() {
		fmt.Fprintf(&b, "- %s\n", e)
	}
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following "+
		"chart(s):\n%s:\n%s", c.meta.Name, b.String())
}

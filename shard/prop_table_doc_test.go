package shard

import (
	"os"
	"regexp"
	"testing"
)

// TestRuleTableDocumented: every op with a sharding rule is named in the
// package documentation's table.
func TestRuleTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for name := range propRules {
		if !regexp.MustCompile(`[\s/]` + regexp.QuoteMeta(name) + `\s`).Match(doc) {
			t.Errorf("op %q has a rule but doc.go's table does not name it", name)
		}
	}
}

package shard

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// TestRuleTableDocumented: every family of sharding rules that package
// tensor names has a rule in the table (ShardGather alone has none), and
// the package documentation's table names each.
func TestRuleTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if name := tensor.ShardFamily(len(propRules)).String(); !strings.HasPrefix(name, "ShardFamily(") {
		t.Errorf("tensor names the family %q, which has no rule in the table", name)
	}
	for f := range propRules {
		fam := tensor.ShardFamily(f)
		switch {
		case fam == tensor.ShardGather:
			if propRules[f] != nil {
				t.Errorf("ShardGather, the family of ops without a rule, has a rule")
			}
			continue
		case propRules[f] == nil:
			t.Errorf("family %v has no rule in the table", fam)
		}
		if !regexp.MustCompile(`\n//\t(?:[a-z_]+ )*` + regexp.QuoteMeta(fam.String()) + `[\s,]`).Match(doc) {
			t.Errorf("family %v has a rule but doc.go's table does not name it", fam)
		}
	}
}

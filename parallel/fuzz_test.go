package parallel_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gonox/gonox/parallel"
)

// FuzzParseStrategy: a name parses exactly when it is a shipped
// strategy's name in any case, to that strategy; otherwise the error
// quotes the name.
func FuzzParseStrategy(f *testing.F) {
	for _, s := range parallel.Strategies() {
		f.Add(s.String())
	}
	f.Add("Single")
	f.Add("compare")
	f.Fuzz(func(t *testing.T, name string) {
		s, err := parallel.ParseStrategy(name)
		known := false
		for _, k := range parallel.Strategies() {
			if strings.EqualFold(k.String(), name) {
				known = true
				if err != nil || s != k {
					t.Fatalf("ParseStrategy(%q) = %v, %v; want %v", name, s, err, k)
				}
			}
		}
		if known {
			return
		}
		if err == nil || s != nil {
			t.Fatalf("ParseStrategy(%q) = %v, %v; want an error", name, s, err)
		}
		if !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Fatalf("error %q does not quote %q", err, name)
		}
	})
}

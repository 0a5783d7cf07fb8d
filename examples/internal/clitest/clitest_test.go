package clitest

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

// fake is a command that exits with status after printing stdout and
// stderr.
func fake(status int, stdout, stderr string) Main {
	return func(args []string, out, errOut io.Writer) int {
		fmt.Fprint(out, stdout)
		fmt.Fprint(errOut, stderr)
		return status
	}
}

// recorder records the failures reported to it.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		main   Main
		status int
		want   []string
		failed bool
	}{
		{"passes", fake(2, "", "x: -a 1: bad\n"), 2, []string{"-a 1", "bad"}, false},
		{"no want", fake(1, "", "x: gone\n"), 1, nil, false},
		{"other status", fake(1, "", "x: -a 1: bad\n"), 2, nil, true},
		{"missing text", fake(2, "", "x: -a 1: bad\n"), 2, []string{"-b"}, true},
		{"two lines", fake(2, "", "x: bad\nmore\n"), 2, nil, true},
		{"no newline", fake(2, "", "x: bad"), 2, nil, true},
		{"silent", fake(2, "", ""), 2, nil, true},
		{"stdout", fake(2, "epoch 1\n", "x: bad\n"), 2, nil, true},
	} {
		var rec recorder
		Fails(&rec, tc.main, tc.status, []string{"-a", "1"}, tc.want...)
		assert.Equal(t, tc.failed, len(rec.errors) > 0, "%s: %q", tc.name, rec.errors)
	}
}

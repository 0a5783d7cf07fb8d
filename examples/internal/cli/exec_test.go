package cli

import (
	"os"
	"os/exec"
	"testing"
)

// execSelf returns a command running this test binary's test named test
// with the extra environment variables.
func execSelf(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

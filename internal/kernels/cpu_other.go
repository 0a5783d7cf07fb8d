//go:build !amd64 || noasm

package kernels

import "runtime"

// best returns Go: this build has no assembly kernels.
func best() Set { return Go }

// describe says why set s cannot run here.
func describe(Set) string {
	if runtime.GOARCH == "amd64" {
		return "this build has no assembly kernels (built with -tags noasm)"
	}
	return "no assembly kernels on " + runtime.GOARCH
}
